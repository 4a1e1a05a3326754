// Package archtest checks the repository's layers: no package imports one
// of a higher layer (docs/development.md, "Layers").
package archtest

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/streamkpca/streamkpca/"

// allowed lists, for each package of the library's lower layers, the
// project's packages it may import. Packages not listed (the service's
// orchestrator, benchmarks, the CLI, tests) may import any.
var allowed = map[string][]string{
	"features":              {},
	"online/internal/dense": {},
	"ingest":                {},
	"output":                {},
	"snapshot":              {"features"},
	"internal/splitmix":     {},
	"online":                {"features", "snapshot", "online/internal/dense", "internal/splitmix"},
	"cluster":               {"features", "online", "snapshot"},
	"publish":               {"features", "snapshot"},
	"transport":             {},
	"serve":                 {"publish", "snapshot"},
	"configs":               {"features", "ingest", "online", "publish"},
}

// TestNoUpwardImports: each package of the lower layers imports only the
// packages below it.
func TestNoUpwardImports(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	seen := 0
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module)
		ok2 := true
		var may []string
		if ok {
			may, ok2 = allowed[pkg]
		}
		if !ok || !ok2 {
			continue
		}
		seen++
		for _, imp := range fields[1:] {
			dep, ours := strings.CutPrefix(imp, module)
			if ours && !slices.Contains(may, dep) {
				t.Errorf("%s imports %s: not a lower layer (allowed: %v)", pkg, dep, may)
			}
		}
	}
	if seen != len(allowed) {
		t.Errorf("found %d of the %d layered packages: the list is out of date", seen, len(allowed))
	}
}
