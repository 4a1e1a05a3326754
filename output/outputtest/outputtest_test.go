package outputtest

import (
	"testing"

	"github.com/streamkpca/streamkpca/output"
)

func TestMemory(t *testing.T) {
	Run(t, func(t *testing.T) (output.Producer, func() []output.Message) {
		m := &output.Memory{}
		return m, m.Messages
	})
}
