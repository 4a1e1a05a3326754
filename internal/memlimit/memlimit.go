// Package memlimit reads the memory limit of the container (cgroup) the
// process runs in, so that the service can size itself below it instead
// of being killed at it.
package memlimit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// noLimit is the smallest figure read as "no limit": cgroup v1 writes a
// page-rounded 2⁶³−1 when none is set.
const noLimit = 1 << 62

// Container returns the memory limit of the process's cgroup in bytes
// and the file it came from, or 0 when there is none (or no cgroup file
// to read). cgroup v2: memory.max of the process's cgroup; v1:
// memory.limit_in_bytes of its memory cgroup; each also at the mount's
// root, where a container sees its own cgroup.
func Container() (int64, string, error) { return container("/") }

// container is Container with the file system rooted at root (tests).
func container(root string) (int64, string, error) {
	own, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		own = nil // no /proc: the mount roots alone
	}
	var v1, v2 string
	sc := bufio.NewScanner(bytes.NewReader(own))
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		f := strings.SplitN(sc.Text(), ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			v2 = f[2]
		case containsController(f[1], "memory"):
			v1 = f[2]
		}
	}
	var candidates []string
	if v1 != "" {
		candidates = append(candidates, filepath.Join(root, "sys/fs/cgroup/memory", v1, "memory.limit_in_bytes"))
	}
	if v2 != "" {
		candidates = append(candidates, filepath.Join(root, "sys/fs/cgroup", v2, "memory.max"))
	}
	candidates = append(candidates, filepath.Join(root, "sys/fs/cgroup/memory/memory.limit_in_bytes"),
		filepath.Join(root, "sys/fs/cgroup/memory.max"))
	for _, path := range candidates {
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, path, fmt.Errorf("memlimit: %w", err)
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, path, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return 0, path, fmt.Errorf("memlimit: %s holds %q, not a byte count", path, s)
		}
		if n >= noLimit {
			return 0, path, nil
		}
		return n, path, nil
	}
	return 0, "", nil
}

func containsController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}
