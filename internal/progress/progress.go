// Package progress prints the refreshing status line of the CLI's long
// commands (fit, produce, bench) on a terminal, and nothing otherwise.
package progress

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"
)

// Line is one refreshing status line.
type Line struct {
	w    io.Writer
	on   bool
	last time.Time
}

// New returns a line on standard error, shown only when it is a terminal.
func New() *Line { return &Line{w: os.Stderr, on: term.IsTerminal(int(os.Stderr.Fd()))} }

// Update redraws the line (at most five times a second).
func (p *Line) Update(format string, args ...any) {
	if !p.on || time.Since(p.last) < 200*time.Millisecond {
		return
	}
	p.last = time.Now()
	fmt.Fprintf(p.w, "\r\033[K"+format, args...)
}

// Done clears the line.
func (p *Line) Done() {
	if p.on {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// ETA formats the remaining time for done of total units after elapsed
// ("" when unknown or finished).
func ETA(done, total float64, elapsed time.Duration) string {
	if done <= 0 || total <= done {
		return ""
	}
	left := time.Duration(float64(elapsed) * (total - done) / done).Round(time.Second)
	return "  ETA " + left.String()
}
