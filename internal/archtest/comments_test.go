package archtest

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCommentsNameFilesThatExist: a Go comment that names a path in the
// repository (a package directory or a file, "online/subspace.go",
// "internal/tools/bench") names one that exists, and a file named alone
// ("carve_test.go") is in the comment's own package. Packages move and files
// are split; a comment pointing a reader at a path that is gone is the
// commonest way a comment starts to say what the code does not.
func TestCommentsNameFilesThatExist(t *testing.T) {
	root := "../.."
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var top []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			top = append(top, regexp.QuoteMeta(e.Name()))
		}
	}
	// A path starts at a top-level directory, not inside another path or
	// an import path (github.com/…/online is not a claim about this tree).
	path := regexp.MustCompile(`(?:^|[^\w./-])((?:` + strings.Join(top, "|") + `)/[\w./-]*\w)`)
	// package.Identifier after a package path: the identifier is code.
	ident := regexp.MustCompile(`\.[A-Z]\w*$`)
	// A file named alone ("carve_test.go") is one of the comment's own
	// package; a few names are other projects' files, said as such
	// (the NATS client is "nats.go"; kafka-go's reader.go).
	bare := regexp.MustCompile(`(?:^|[^\w./-])([a-z_0-9]+\.go)\b`)
	theirs := map[string]bool{"nats.go": true, "reader.go": true}
	checked := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if !strings.HasPrefix(line, "//") {
				continue
			}
			for _, m := range bare.FindAllStringSubmatch(line, -1) {
				checked++
				if _, err := os.Stat(filepath.Join(filepath.Dir(p), m[1])); err != nil && !theirs[m[1]] {
					rel, _ := filepath.Rel(root, p)
					t.Errorf("%s:%d: the comment names %s, which is not a file of its package (name another package's file by its path)", rel, n, m[1])
				}
			}
			for _, m := range path.FindAllStringSubmatch(line, -1) {
				name := ident.ReplaceAllString(strings.TrimRight(m[1], "."), "")
				checked++
				if _, err := os.Stat(filepath.Join(root, name)); err != nil {
					rel, _ := filepath.Rel(root, p)
					t.Errorf("%s:%d: the comment names %s, which is not in the repository", rel, n, name)
				}
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Errorf("only %d paths named in comments: the scan is broken", checked)
	}
}
