package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The run loop's package is being carved along its edges (admission to
// ingest, distribution to publish): these are its counts today, measured
// from the source, and the most they may be. A change that lowers one
// lowers its bound here; none may raise it.
const (
	maxPipelineFields    = 15 // pipeline.Pipeline's fields (the bound)
	maxContextFields     = 7  // context.Context fields of structs outside tests (goal: none outside a goroutine's own type)
	maxInterfaceMethods  = 18 // methods of the largest interface outside tests (pipeline's learner)
	maxPipelineFiles     = 18 // pipeline's non-test files
	maxPipelineMethodsOf = 47 // methods with receiver *Pipeline
)

// TestTheCarveOnlyGoesForward measures the counts above with go/ast and
// fails when one passes its bound; it logs them (go test -v) for
// docs/development.md.
func TestTheCarveOnlyGoesForward(t *testing.T) {
	root := "../.."
	fields, methods, files := 0, 0, 0
	ctxFields, largest, largestName := 0, 0, ""
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules" || n == "_asm") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		inPipeline := filepath.Dir(p) == filepath.Join(root, "pipeline")
		if inPipeline {
			files++
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.TypeSpec:
				switch tt := n.Type.(type) {
				case *ast.StructType:
					for _, fl := range tt.Fields.List {
						names := max(len(fl.Names), 1)
						if inPipeline && n.Name.Name == "Pipeline" {
							fields += names
						}
						if sel, ok := fl.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Context" {
							if id, ok := sel.X.(*ast.Ident); ok && id.Name == "context" {
								ctxFields += names
							}
						}
					}
				case *ast.InterfaceType:
					if m := tt.Methods.NumFields(); m > largest {
						largest, largestName = m, p+": "+n.Name.Name
					}
				}
			case *ast.FuncDecl:
				if inPipeline && n.Recv != nil && len(n.Recv.List) == 1 {
					if st, ok := n.Recv.List[0].Type.(*ast.StarExpr); ok {
						if id, ok := st.X.(*ast.Ident); ok && id.Name == "Pipeline" {
							methods++
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pipeline.Pipeline: %d fields, %d methods, %d files; context.Context fields: %d; the largest interface: %d methods (%s)",
		fields, methods, files, ctxFields, largest, largestName)
	if fields == 0 || methods == 0 || files == 0 {
		t.Fatalf("found no Pipeline (%d fields, %d methods, %d files): the walk is wrong", fields, methods, files)
	}
	for _, c := range []struct {
		what     string
		got, max int
	}{
		{"pipeline.Pipeline's fields", fields, maxPipelineFields},
		{"methods of *pipeline.Pipeline", methods, maxPipelineMethodsOf},
		{"pipeline's files", files, maxPipelineFiles},
		{"context.Context fields", ctxFields, maxContextFields},
		{"the largest interface's methods (" + largestName + ")", largest, maxInterfaceMethods},
	} {
		if c.got > c.max {
			t.Errorf("%s: %d, more than the %d of the carve so far (issue 62): move it to its edge instead", c.what, c.got, c.max)
		}
	}
}
