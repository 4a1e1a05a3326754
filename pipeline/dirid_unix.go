//go:build unix

package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// dirIdentity names the directory dir as publish.Owner.Dir does: its
// host, device and inode, which a copy of it (a restored backup, a
// cloned volume) does not share, while a restart on it does. Its path
// when it cannot be read.
func dirIdentity(dir string) string {
	host, _ := os.Hostname()
	abs, _ := filepath.Abs(dir)
	fi, err := os.Stat(dir)
	if err != nil {
		return host + ":" + abs
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return host + ":" + abs
	}
	return fmt.Sprintf("%s:%s:dev=%d:ino=%d", host, abs, uint64(st.Dev), st.Ino)
}
