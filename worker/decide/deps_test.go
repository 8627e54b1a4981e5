package decide_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// forbidden are the packages the decision must never reach, directly or
// through another package: a prefix ends in "/" and covers every package
// below it. The database driver and River are how a decision would act;
// net/http, database/sql and os/exec are I/O of other kinds.
var forbidden = []string{
	"github.com/jackc/pgx/v5", "github.com/jackc/pgx/v5/",
	"github.com/riverqueue/river", "github.com/riverqueue/river/",
	"net/http", "database/sql", "os/exec",
}

func forbiddenDep(pkg string) bool {
	for _, f := range forbidden {
		if pkg == f || strings.HasSuffix(f, "/") && strings.HasPrefix(pkg, f) {
			return true
		}
	}
	return false
}

// The decision reaches no database, no River client and no network: its
// dependency closure (non-test files, as a build links them) holds none
// of the forbidden packages. A change that needs one belongs in the
// worker, which gathers the facts and acts.
func TestDecideReachesNoDatabaseRiverOrNetwork(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the package's dependencies: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps: %v\n%s", err, stderr)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 2 {
		t.Fatalf("go list -deps listed %d packages: %q", len(deps), deps)
	}
	for _, d := range deps {
		if forbiddenDep(d) {
			t.Errorf("worker/decide depends on %s (go list -deps); decisions do no I/O: gather the fact in the worker and pass it in", d)
		}
	}
}

// clockCalls are the time functions that read the clock or wait on it.
var clockCalls = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true, "AfterFunc": true,
	"Tick": true, "NewTimer": true, "NewTicker": true,
}

// The decision reads no clock: every time it needs is a fact (an age, the
// time left on a pause, a now passed in).
func TestDecideReadsNoClock(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		timeName := ""
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); path == "time" {
				timeName = "time"
				if imp.Name != nil {
					timeName = imp.Name.Name
				}
			}
		}
		if timeName == "" {
			continue
		}
		if timeName == "." || timeName == "_" {
			t.Errorf("%s imports time as %q: name it, so that its clock calls can be seen", name, timeName)
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == timeName && clockCalls[sel.Sel.Name] {
				t.Errorf("%s: time.%s: decisions read no clock; pass the time in as a fact", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no non-test Go files found")
	}
}
