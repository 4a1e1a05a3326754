package configs

import (
	"reflect"
	"strings"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/online"
)

// A setting that configures the learner says so once, in its `online`
// tag: the path of the online.Config field it sets (Kernel.Bandwidth for
// a field of a field), and ",filled" when online chooses its default
// (online.Config.WithDefaults) and this file shows that choice. Online,
// OnlineKey and SetDefaults read the tags; nothing else maps a setting to
// the learner.

// onlineField is one tagged setting.
type onlineField struct {
	key    string // YAML path: learner.max_features
	index  []int  // of the field in Config
	path   []string
	filled bool
}

// onlineFields are Config's tagged settings, in declaration order.
var onlineFields = func() []onlineField {
	var out []onlineField
	var walk func(t reflect.Type, prefix string, index []int)
	walk = func(t reflect.Type, prefix string, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			key := prefix + strings.Split(f.Tag.Get("yaml"), ",")[0]
			at := append(append([]int(nil), index...), i)
			if tag, ok := f.Tag.Lookup("online"); ok {
				path, opt, _ := strings.Cut(tag, ",")
				out = append(out, onlineField{key: key, index: at, path: strings.Split(path, "."), filled: opt == "filled"})
				continue
			}
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[TLS]() {
				walk(f.Type, key+".", at)
			}
		}
	}
	walk(reflect.TypeFor[Config](), "", nil)
	return out
}()

// at returns the field of v (an online.Config) at path.
func at(v reflect.Value, path []string) reflect.Value {
	for _, name := range path {
		v = v.FieldByName(name)
	}
	return v
}

// Online is the learner's configuration for these settings: the one
// mapping from the service's (and fit's) configuration to package online.
// dim is the input dimension (0: from the first batch). Zero fields stay
// zero: online fills its defaults.
func (l Learner) Online(model string, dim int) online.Config {
	c := online.Config{Model: model, Dim: dim}
	src := reflect.ValueOf(Config{Learner: l})
	dst := reflect.ValueOf(&c).Elem()
	for _, f := range onlineFields {
		if strings.HasPrefix(f.key, "learner.") {
			to := at(dst, f.path)
			to.Set(src.FieldByIndex(f.index).Convert(to.Type()))
		}
	}
	return c
}

// fillFromOnline sets the settings whose default online chooses (tagged
// ",filled") to o's.
func (l *Learner) fillFromOnline(o online.Config) {
	c := Config{Learner: *l}
	dst, src := reflect.ValueOf(&c).Elem(), reflect.ValueOf(o)
	for _, f := range onlineFields {
		if f.filled {
			to := dst.FieldByIndex(f.index)
			to.Set(at(src, f.path).Convert(to.Type()))
		}
	}
	*l = c.Learner
}

// OnlineKey names the setting of this file that sets online.Config's
// field (as cluster.Difference names it: Kernel.Bandwidth for a kernel's
// field): the inverse of Online. A field it does not know is returned as
// it is.
func OnlineKey(field string) string {
	for _, f := range onlineFields {
		if strings.Join(f.path, ".") == field {
			return f.key
		}
	}
	if strings.HasPrefix(field, "KernelY.") {
		return "learner.kernel_y" // its only other setting: bandwidth_y
	}
	if field == "DimY" {
		return "the dimension of the messages' y"
	}
	return field
}

// KernelSpec returns the learner's kernel as package features describes it.
func (l Learner) KernelSpec() features.Kernel { return l.Online("", 0).Kernel }

// KernelYSpec returns the second view's kernel.
func (l Learner) KernelYSpec() features.Kernel { return l.Online("", 0).KernelY }
