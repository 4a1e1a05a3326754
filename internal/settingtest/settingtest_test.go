package settingtest

import (
	"reflect"
	"testing"
	"time"
)

// TestChangeChangesEveryKind: each kind a setting has comes out other
// than it went in; a kind it does not know is reported, not changed.
func TestChangeChangesEveryKind(t *testing.T) {
	for _, v := range []any{"", "a", false, true, 0, int64(-3), uint64(9), 0.0, 1.5, time.Second, []float64(nil), []string{"x"}} {
		p := reflect.New(reflect.TypeOf(v))
		p.Elem().Set(reflect.ValueOf(v))
		if !Change(p.Elem()) {
			t.Errorf("%T %v: not changed", v, v)
			continue
		}
		if reflect.DeepEqual(p.Elem().Interface(), v) {
			t.Errorf("%T %v: still %v", v, v, p.Elem().Interface())
		}
	}
	var m map[string]int
	if Change(reflect.ValueOf(&m).Elem()) {
		t.Error("a map was changed: want false")
	}
}
