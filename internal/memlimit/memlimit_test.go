package memlimit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, root, path, data string) {
	t.Helper()
	p := filepath.Join(root, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestContainer reads the limits cgroup v1 and v2 write, as files laid
// out as the kernel lays them out: a v2 limit in the process's cgroup, a
// v1 limit in its memory cgroup, "max" and v1's page-rounded 2⁶³−1 as no
// limit, the mount root when /proc names no cgroup, nothing at all.
func TestContainer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"v2", map[string]string{"proc/self/cgroup": "0::/kubepods/pod1/c1\n", "sys/fs/cgroup/kubepods/pod1/c1/memory.max": "419430400\n"}, 400 << 20},
		{"v2 max", map[string]string{"proc/self/cgroup": "0::/a\n", "sys/fs/cgroup/a/memory.max": "max\n"}, 0},
		{"v1", map[string]string{"proc/self/cgroup": "4:memory:/process_api/x\n3:cpuset:/\n0::/\n", "sys/fs/cgroup/memory/process_api/x/memory.limit_in_bytes": "419430400\n"}, 400 << 20},
		{"v1 none", map[string]string{"proc/self/cgroup": "4:cpu,memory:/\n", "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0},
		{"root", map[string]string{"sys/fs/cgroup/memory.max": "268435456"}, 256 << 20},
		{"nothing", map[string]string{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for p, d := range tc.files {
				write(t, root, p, d)
			}
			got, _, err := container(root)
			if err != nil || got != tc.want {
				t.Fatalf("limit %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	for _, bad := range []string{"lots", "0", "-5", ""} {
		root := t.TempDir()
		write(t, root, "sys/fs/cgroup/memory.max", bad)
		if n, _, err := container(root); err == nil {
			t.Errorf("a limit of %q read as %d without an error", bad, n)
		}
	}
	// A process in both hierarchies (hybrid mode): v1's memory controller
	// holds the limit the kernel enforces and is read first.
	root := t.TempDir()
	write(t, root, "proc/self/cgroup", "0::/u\n5:memory:/m\n")
	write(t, root, "sys/fs/cgroup/memory/m/memory.limit_in_bytes", "1048576")
	write(t, root, "sys/fs/cgroup/u/memory.max", "2097152")
	if n, path, err := container(root); err != nil || n != 1<<20 || !strings.HasSuffix(path, "memory/m/memory.limit_in_bytes") {
		t.Errorf("hybrid: %d from %s (%v), want 1 MiB from v1's memory cgroup", n, path, err)
	}
}
