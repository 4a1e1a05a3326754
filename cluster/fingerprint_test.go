package cluster

import (
	"reflect"
	"testing"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/settingtest"
	"github.com/streamkpca/streamkpca/online"
)

// TestFingerprintCoversEveryModelSetting: changing any field of
// online.Config (a field of a field too) changes a member's fingerprint
// unless the field is tagged a runtime setting, and changing a runtime
// one does not (members of one group run on machines of their own).
// The fields are walked, not listed: a setting added to online.Config is
// covered without an edit here.
func TestFingerprintCoversEveryModelSetting(t *testing.T) {
	base := online.Config{Model: "m", K: 2, Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 1}}
	fp := fingerprint(base)
	var walk func(path string, v reflect.Value, runtime bool)
	walk = func(path string, v reflect.Value, runtime bool) {
		t.Helper()
		typ := v.Type()
		for i := range typ.NumField() {
			f, fv := typ.Field(i), v.Field(i)
			name, rt := path+f.Name, runtime || online.Runtime(f)
			if f.Type.Kind() == reflect.Struct {
				walk(name+".", fv, rt)
				continue
			}
			old := reflect.New(f.Type).Elem()
			old.Set(fv)
			if !settingtest.Change(fv) {
				t.Errorf("%s: no other value of kind %s to try", name, f.Type.Kind())
				continue
			}
			same := fingerprint(base) == fp
			fv.Set(old)
			switch {
			case rt && !same:
				t.Errorf("%s is a runtime setting but changing it changes the fingerprint", name)
			case !rt && same:
				t.Errorf("%s defines the model but changing it leaves the fingerprint alone", name)
			}
		}
	}
	walk("", reflect.ValueOf(&base).Elem(), false)
}
