//go:build !unix

package pipeline

import (
	"os"
	"path/filepath"
)

// dirIdentity names the directory dir as publish.Owner.Dir does: its
// host and path (without a device and inode here, a copy at the same
// path on the same host is not told apart).
func dirIdentity(dir string) string {
	host, _ := os.Hostname()
	abs, _ := filepath.Abs(dir)
	return host + ":" + abs
}
