package configs

import (
	"errors"
	"flag"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// LearnerFlags registers on fs one flag per learner setting, named after
// its YAML key (max_features → --max-features), with the default and the
// `doc` tag configs/streamkpca.yaml shows too; --algo is kept as another name
// for --algorithm and "auto" for a bandwidth means the median trick. The
// returned function lists the settings given on the command line as
// "learner.key=value" overrides for Load: `streamkpca fit` and `run` then
// share one set of defaults, one validation and one mapping to the
// learner (Learner.Online).
func LearnerFlags(fs *flag.FlagSet) func() []string {
	var sets []string
	def := reflect.ValueOf(Default().Learner)
	t := def.Type()
	for i := 0; i < t.NumField(); i++ {
		key := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if key == "" || key == "-" || key == "linger" { // linger: the service's batching only
			continue
		}
		f := &settingFlag{key: key, sets: &sets, def: fmt.Sprint(def.Field(i).Interface()), kind: def.Field(i).Kind()}
		switch def.Field(i).Kind() {
		case reflect.Bool:
			f.boolean = true
		case reflect.Slice:
			f.def = strings.Trim(strings.ReplaceAll(f.def, " ", ","), "[]")
		}
		fs.Var(f, strings.ReplaceAll(key, "_", "-"), strings.ReplaceAll(t.Field(i).Tag.Get("doc"), "\n", " "))
		if key == "algorithm" {
			fs.Var(f, "algo", "the same as --algorithm")
		}
	}
	return func() []string { return sets }
}

// settingFlag is a flag.Value recording "learner.key=value".
type settingFlag struct {
	key, def     string
	boolean, set bool
	sets         *[]string
	kind         reflect.Kind
}

// String is the default, for the help ("" for zero values: not shown).
func (f *settingFlag) String() string {
	if f == nil || f.set || f.def == "0" || f.def == "false" {
		return ""
	}
	return f.def
}

func (f *settingFlag) IsBoolFlag() bool { return f.boolean }

func (f *settingFlag) Set(v string) error {
	if v == "auto" && (f.key == "bandwidth" || f.key == "bandwidth_y") {
		return nil // the default: the median trick
	}
	// The value in the flag's terms (the flag package prefixes "invalid
	// value V for flag -NAME: "); the settings' own checks run later.
	switch f.kind {
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return errors.New("not a whole number")
		}
		if n == 0 || n < 0 && f.key != "keep_bytes" && f.key != "cache_bytes" {
			return errors.New("must be positive (leave the flag out for the default)")
		}
	case reflect.Uint64:
		if _, err := strconv.ParseUint(v, 10, 64); err != nil {
			return errors.New("not a whole number ≥ 0")
		}
	case reflect.Float64:
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return errors.New("not a number")
		}
	}
	f.set = true
	*f.sets = append(*f.sets, "learner."+f.key+"="+v)
	return nil
}
