package outputtest_test

import (
	"context"
	"slices"
	"testing"

	"github.com/streamkpca/streamkpca/internal/testkit"
	"github.com/streamkpca/streamkpca/output"
	"github.com/streamkpca/streamkpca/output/outputtest"
)

func TestMemory(t *testing.T) {
	outputtest.Run(t, func(t *testing.T) (output.Producer, func() []output.Message) {
		m := &output.Memory{}
		return m, m.Messages
	})
}

// lossy stores every message but the last of each write.
type lossy struct{ *output.Memory }

func (l lossy) Write(ctx context.Context, ms []output.Message) error {
	if len(ms) > 1 {
		ms = ms[:len(ms)-1]
	}
	return l.Memory.Write(ctx, ms)
}

// reversed stores each write's messages in reverse order.
type reversed struct{ *output.Memory }

func (r reversed) Write(ctx context.Context, ms []output.Message) error {
	ms = slices.Clone(ms)
	slices.Reverse(ms)
	return r.Memory.Write(ctx, ms)
}

// careless writes under an ended context and reports success.
type careless struct{ *output.Memory }

func (c careless) Write(_ context.Context, ms []output.Message) error {
	return c.Memory.Write(context.Background(), ms)
}

// headless drops the headers.
type headless struct{ *output.Memory }

func (h headless) Write(ctx context.Context, ms []output.Message) error {
	ms = slices.Clone(ms)
	for i := range ms {
		ms[i].Headers = nil
	}
	return h.Memory.Write(ctx, ms)
}

// TestTheSuiteCanFail: a producer that breaks one promise of
// output.Producer fails the subtest of that promise and passes the
// others.
func TestTheSuiteCanFail(t *testing.T) {
	broken := map[string]func(*output.Memory) output.Producer{
		"lossy":    func(m *output.Memory) output.Producer { return lossy{m} },
		"reversed": func(m *output.Memory) output.Producer { return reversed{m} },
		"careless": func(m *output.Memory) output.Producer { return careless{m} },
		"headless": func(m *output.Memory) output.Producer { return headless{m} },
	}
	for name, wrap := range broken {
		if testkit.InChild("OUTPUTTEST_BROKEN=" + name) {
			outputtest.Run(t, func(t *testing.T) (output.Producer, func() []output.Message) {
				m := &output.Memory{}
				return wrap(m), m.Messages
			})
			return
		}
	}
	all := []string{"StoresEveryRecordInOrder", "EmptyWriteStoresNothing", "WriteEndsWithItsContext"}
	for name, fails := range map[string][]string{
		"lossy":    {"StoresEveryRecordInOrder"},
		"reversed": {"StoresEveryRecordInOrder"},
		"careless": {"WriteEndsWithItsContext"},
		"headless": {"StoresEveryRecordInOrder"},
	} {
		testkit.ChildFails(t, "OUTPUTTEST_BROKEN="+name, all, fails)
	}
}
