package integration

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamkpca/streamkpca/internal/devstack"
)

// refuseProduce makes the embedded broker answer every produce request
// to topic with TOPIC_AUTHORIZATION_FAILED (as after an ACL change) while
// refusing() is true; refused, if set, counts the refusals.
func refuseProduce(s *devstack.Stack, topic string, refusing func() bool, refused func()) {
	s.Kafka.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		s.Kafka.KeepControl()
		req := r.(*kmsg.ProduceRequest)
		if !refusing() || len(req.Topics) == 0 || req.Topics[0].Topic != topic {
			return nil, nil, false
		}
		if refused != nil {
			refused()
		}
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, 29 // TOPIC_AUTHORIZATION_FAILED
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
}
