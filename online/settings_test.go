package online

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/streamkpca/streamkpca/snapshot"
)

// Every model setting has a declared place in a snapshot: a header path,
// the views or the learner's own record. A field added to Config
// without a `header` (or `setting`) tag fails here.
func TestEveryModelSettingHasAPlaceInTheHeader(t *testing.T) {
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		f := ct.Field(i)
		if s := f.Tag.Get("setting"); s != "" {
			if f.Tag.Get("header") != "" {
				t.Errorf("Config.%s is a %s setting and has a header tag: a snapshot does not keep it", f.Name, s)
			}
			continue
		}
		tag := f.Tag.Get("header")
		p, opt, _ := strings.Cut(tag, ",")
		if tag == "" || (opt != "" && opt != "one-view" && opt != "two-view") {
			t.Errorf("Config.%s: header tag %q; say where a snapshot keeps it (a header path, view or learner, optionally ,one-view or ,two-view)", f.Name, tag)
		}
		if p == "view" || p == "learner" {
			continue
		}
		hf, ok := reflect.TypeFor[snapshot.Header]().FieldByName(strings.Split(p, ".")[0])
		for _, name := range strings.Split(p, ".")[1:] {
			if ok {
				hf, ok = hf.Type.FieldByName(name)
			}
		}
		if !ok || hf.Type.Kind() != f.Type.Kind() {
			t.Errorf("Config.%s: header path %q names no header field of its kind", f.Name, p)
		}
	}
}

// A setting whose tag is a header path goes through the header and its
// wire form (JSON) and comes back with no code of its own: every such
// field is given a value other than its zero, written by toHeader,
// encoded, decoded and read by fromHeader. A new field with a path tag is
// covered with no other edit.
func TestHeaderPathSettingsRoundTrip(t *testing.T) {
	for _, twoView := range []bool{false, true} {
		var in Config
		cv := reflect.ValueOf(&in).Elem()
		var set []string
		for i := range cv.NumField() {
			f := cv.Type().Field(i)
			tag := f.Tag.Get("header")
			if headerPath(f) == "" || strings.HasSuffix(tag, ",one-view") && twoView || strings.HasSuffix(tag, ",two-view") && !twoView {
				continue
			}
			set = append(set, f.Name)
			switch v := cv.Field(i); v.Kind() {
			case reflect.String:
				v.SetString("v-" + f.Name)
			case reflect.Int, reflect.Int64:
				v.SetInt(int64(i + 2))
			case reflect.Uint64:
				v.SetUint(uint64(i) + 1<<40)
			case reflect.Float64:
				v.SetFloat(0.25 + float64(i))
			case reflect.Bool:
				v.SetBool(true)
			default:
				t.Fatalf("Config.%s: a %s in the header; add its kind here", f.Name, v.Kind())
			}
		}
		var h snapshot.Header
		in.toHeader(&h, twoView)
		b, err := json.Marshal(&h)
		if err != nil {
			t.Fatal(err)
		}
		var back snapshot.Header
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		var out Config
		out.fromHeader(&back)
		ov := reflect.ValueOf(out)
		for _, name := range set {
			if got, want := ov.FieldByName(name).Interface(), cv.FieldByName(name).Interface(); got != want {
				t.Errorf("two-view %v: Config.%s came back %v, want %v", twoView, name, got, want)
			}
		}
		if len(set) < 10 {
			t.Errorf("two-view %v: only %d settings have header paths: %v", twoView, len(set), set)
		}
	}
}

// A one-view model does not record two-view settings and the reverse:
// the bytes of a kpca snapshot stay what they were before the header was
// derived from the tags (ksir's default slices would appear in them).
func TestHeaderLeavesOutTheOtherKindsSettings(t *testing.T) {
	c := Config{Slices: 10, Uncentered: true, Center: true}
	var one, two snapshot.Header
	c.toHeader(&one, false)
	c.toHeader(&two, true)
	if one.Settings.Slices != 0 || one.Settings.Uncentered || !one.Settings.Center {
		t.Errorf("one-view header settings %+v, want center only", one.Settings)
	}
	if two.Settings.Slices != 10 || !two.Settings.Uncentered || two.Settings.Center {
		t.Errorf("two-view header settings %+v, want slices and uncentered", two.Settings)
	}
}
