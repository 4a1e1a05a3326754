// Package cliflag parses a verb's flags the way the streamkpca command
// answers a mistake: one line that names it, the flag (or verb) that was
// probably meant, and the way to the verb's help — not the whole flag
// list — and exit status 2 for every usage error (UsageError).
package cliflag

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"strings"
)

// UsageError is a command line the verb cannot take: main exits with 2.
type UsageError struct {
	Verb string
	Err  error
}

func (e *UsageError) Error() string {
	return fmt.Sprintf("%v (streamkpca %s -h lists its flags)", e.Err, e.Verb)
}

func (e *UsageError) Unwrap() error { return e.Err }

// Parse parses args into fs. -h and --help print fs's usage and return
// flag.ErrHelp; a bad flag returns a *UsageError naming the nearest
// defined flag, without the usage dump.
func Parse(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	fs.SetOutput(out)
	if err == nil {
		return nil
	}
	if errors.Is(err, flag.ErrHelp) {
		out.Write(buf.Bytes())
		return err
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if s := Nearest(strings.TrimLeft(name, "-"), names); s != "" {
			msg += "; did you mean --" + s + "?"
		}
	}
	return &UsageError{Verb: fs.Name(), Err: errors.New(msg)}
}

// Nearest returns the candidate closest to word by edit distance, if it
// is close enough to be what was meant (at most a third of its letters
// changed, and at least one), else "".
func Nearest(word string, candidates []string) string {
	best, bestD := "", 0
	for _, c := range candidates {
		d := distance(word, c)
		if best == "" || d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" || bestD > max(1, len(best)/3) {
		return ""
	}
	return best
}

// distance is the Levenshtein distance between a and b (adjacent swaps
// count as one: "imput" is one from "input", "ipnut" one too).
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
