package online

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/streamkpca/streamkpca/snapshot"
)

// toHeader writes c's settings whose `header` tag is a path of
// snapshot.Header fields into h: the one place Snapshot records them, for
// every learner. A setting of the other kind of learner (tagged
// ",one-view" or ",two-view") is left out: a one-view model does not
// record ksir's slices.
func (c *Config) toHeader(h *snapshot.Header, twoView bool) {
	skip := "one-view"
	if !twoView {
		skip = "two-view"
	}
	headerPairs(reflect.ValueOf(c).Elem(), reflect.ValueOf(h).Elem(), func(f reflect.StructField, cf, hf reflect.Value) {
		if !strings.HasSuffix(f.Tag.Get("header"), ","+skip) {
			hf.Set(cf.Convert(hf.Type()))
		}
	})
}

// fromHeader sets c's settings whose `header` tag is a path from h: the
// one place Restore reads them back.
func (c *Config) fromHeader(h *snapshot.Header) {
	headerPairs(reflect.ValueOf(c).Elem(), reflect.ValueOf(h).Elem(), func(_ reflect.StructField, cf, hf reflect.Value) {
		cf.Set(hf.Convert(cf.Type()))
	})
}

// headerPairs calls fn with each field of the struct cfg whose `header`
// tag is a path and the field of the struct h the path names. A path that
// names no field, or a field of another kind, is a defect of the
// declaration (TestHeaderTagsNameHeaderFields finds it) and panics.
func headerPairs(cfg, h reflect.Value, fn func(f reflect.StructField, cf, hf reflect.Value)) {
	t := cfg.Type()
	for i := range t.NumField() {
		path := headerPath(t.Field(i))
		if path == "" {
			continue
		}
		hf := h
		for _, name := range strings.Split(path, ".") {
			hf = hf.FieldByName(name)
			if !hf.IsValid() {
				panic(fmt.Sprintf("online: Config.%s's header path %q names no field of %s", t.Field(i).Name, path, h.Type()))
			}
		}
		if cf := cfg.Field(i); cf.Kind() != hf.Kind() {
			panic(fmt.Sprintf("online: Config.%s (%s) and header field %s (%s) differ in kind", t.Field(i).Name, cf.Kind(), path, hf.Kind()))
		} else {
			fn(t.Field(i), cf, hf)
		}
	}
}

// headerPath is the path of f's `header` tag when it is one; "" when
// the views or the learner record f, or f is not in the header.
func headerPath(f reflect.StructField) string {
	p, _, _ := strings.Cut(f.Tag.Get("header"), ",")
	switch p {
	case "view", "learner":
		return ""
	default:
		return p
	}
}
