package ingest_test

import (
	"testing"

	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/ingest/sourcetest"
)

func TestMemSourceConformance(t *testing.T) {
	sourcetest.Run(t, func(t *testing.T, topic string) (ingest.Source, func(int, ...[]byte)) {
		s := ingest.NewMemSource(topic, 8)
		return s, func(p int, v ...[]byte) { s.Produce(p, v...) }
	})
}
