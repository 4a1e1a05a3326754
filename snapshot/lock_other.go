//go:build !unix

package snapshot

import (
	"errors"
	"os"
)

// Without flock the lock is the file alone: it does not keep a second
// process out (unix systems only).
var errWouldBlock = errors.New("locked")

func flock(*os.File) error { return nil }

func funlock(*os.File) error { return nil }
