// Package benchcli is the command line of `streamkpca bench`: it parses
// each benchmark's flags, runs it (package internal/tools/bench), prints its
// JSON to stdout and its progress and tables to stderr.
package benchcli

import (
	"io"
	"os"
)

// Stdout receives the benchmarks' JSON; nil means os.Stdout.
var Stdout io.Writer

func stdout() io.Writer {
	if Stdout != nil {
		return Stdout
	}
	return os.Stdout
}
