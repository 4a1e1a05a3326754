package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/snapshot"
)

type pubItem struct {
	snap *snapshot.Snapshot
	data []byte
}

// publishLoop publishes the newest persisted version, retrying with backoff
// while NATS is unreachable; a newer version supersedes a pending one.
func (p *Pipeline) publishLoop(ctx context.Context) {
	var pending *pubItem
	backoff := 500 * time.Millisecond
	for {
		if pending == nil {
			select {
			case <-ctx.Done():
				return
			case it := <-p.pubReq:
				pending = &it
			case <-p.pubFinal:
				select {
				case it := <-p.pubReq:
					pending = &it
				default:
					return // nothing left to publish
				}
			}
		}
		select {
		case it := <-p.pubReq:
			pending = &it
		default:
		}
		n, err := p.publishOnce(ctx, pending)
		if err == nil {
			p.met.Publishes.Inc()
			p.mu.Lock()
			p.status.Published = n.Version
			p.met.Published.Set(float64(n.Version))
			p.mu.Unlock()
			// Debug: "snapshot persisted" is the one info line a snapshot gets.
			p.log.Debug().Uint64("version", n.Version).Str("object", n.Object).Int("bytes", n.Size).Msg("published")
			pending, backoff = nil, 500*time.Millisecond
			continue
		}
		p.met.PublishErrors.Inc()
		p.log.Warn().Err(err).Int64("retry_in_ms", backoff.Milliseconds()).Msg("publish failed; the snapshot is safe on disk, retrying")
		select {
		case <-ctx.Done():
			return
		case it := <-p.pubReq:
			pending = &it
		case <-time.After(backoff):
			backoff = min(2*backoff, 30*time.Second)
		}
	}
}

// publishTimeout bounds one publish; a call still running publishGrace
// after it is abandoned and the next attempt starts afresh, so that the
// publish loop can never hang on the network, whatever the client does.
const publishTimeout, publishGrace = 10 * time.Second, 5 * time.Second

func (p *Pipeline) publishOnce(ctx context.Context, it *pubItem) (publish.Notice, error) {
	pctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	type result struct {
		n   publish.Notice
		err error
	}
	res := make(chan result, 1)
	go func() {
		n, err := p.pub.Publish(pctx, it.snap, it.data)
		res <- result{n, err}
	}()
	select {
	case r := <-res:
		return r.n, r.err
	case <-time.After(publishTimeout + publishGrace):
		p.pub.Reset()
		return publish.Notice{}, fmt.Errorf("publish of version %d did not return %v after its deadline; abandoned, retrying with fresh handles", it.snap.Header.Version(), publishGrace)
	}
}
