// Package settingtest helps tests that walk a configuration struct by
// reflection (every setting covered without a list to keep).
package settingtest

import "reflect"

// Change sets v, a settable scalar or slice, to another value of its
// kind and reports whether it knew how.
func Change(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int64:
		v.SetInt(v.Int() + 7)
	case reflect.Uint64:
		v.SetUint(v.Uint() + 7)
	case reflect.Float64:
		v.SetFloat(v.Float() + 0.5)
	case reflect.Slice:
		v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
	default:
		return false
	}
	return true
}
