package ledger_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// writeSQL finds the table a statement writes: INSERT INTO t, DELETE FROM
// t, UPDATE t [alias] SET. A table the source computes (a function's
// result) reads as "?".
var writeSQL = regexp.MustCompile(`(?is)\b(?:insert\s+into|delete\s+from|update)\s+(?:only\s+)?((?:"?[a-z_]+"?\.)?"?[a-z_?]+"?)(?:\s+(?:as\s+)?[a-z_]+)?\s+(?:set\b|\(|values\b|select\b|where\b|using\b|returning\b|default\b|$)`)

// owner is the one package that may write table (its directory in the
// module), "" for a table no owner claims (not triage's nor River's).
func owner(table string) string {
	table = strings.ToLower(strings.Trim(table[strings.LastIndex(table, ".")+1:], `"`))
	switch {
	case strings.HasPrefix(table, "river_"):
		return "worker/rivertable"
	case table == "triage_migration":
		return "migrations"
	case strings.HasPrefix(table, "triage_"), table == "?":
		return "ledger"
	}
	return ""
}

// Every statement that writes a table is in the table's owner: River's
// tables in worker/rivertable, triage's in ledger (its migrations table in
// migrations). Test helpers (packages named *test) and tests are left out.
func TestOnlyTheOwnerWritesATable(t *testing.T) {
	t.Parallel()
	var bad []string
	eachSource(t, func(rel, dir, path string) {
		for _, w := range writesIn(t, path) {
			own := owner(w.table)
			if own == "" || own == dir {
				continue
			}
			bad = append(bad, rel+":"+strconv.Itoa(w.line)+" writes "+w.table+", owned by "+own)
		}
	})
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("statements writing a table outside its owner (move them to the owner):\n%s", strings.Join(bad, "\n"))
	}
}

// eachSource calls fn with every non-test Go file of the module outside
// test helpers (packages named *test) and testdata: its path from the
// module's root, its directory, and its path on disk.
func eachSource(t *testing.T, fn func(rel, dir, path string)) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || strings.HasSuffix(d.Name(), "test")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fn(rel, filepath.ToSlash(filepath.Dir(rel)), path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

type write struct {
	table string
	line  int
}

// writesIn finds the writing statements in the string constants of a Go
// file (stringsIn).
func writesIn(t *testing.T, path string) []write {
	var out []write
	stringsIn(t, path, func(s string, line int) {
		for _, m := range writeSQL.FindAllStringSubmatch(s, -1) {
			out = append(out, write{table: m[1], line: line})
		}
	})
	return out
}

// stringsIn calls fn with each string constant of a Go file and its line. A
// concatenation is read as one string; an operand that is not a literal is
// River's table name when it is rivertable's Job or Queue, and "?"
// otherwise.
func stringsIn(t *testing.T, path string, fn func(s string, line int)) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		e, ok := n.(ast.Expr)
		if !ok {
			return true
		}
		switch e.(type) {
		case *ast.BinaryExpr, *ast.BasicLit:
		default:
			return true
		}
		s, ok := flatten(e)
		if !ok {
			return true
		}
		fn(s, fset.Position(e.Pos()).Line)
		return false // the parts of a concatenation were read with it
	})
}

// flatten reads a string literal or a concatenation with at least one.
func flatten(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		x, okx := flatten(e.X)
		if !okx {
			x = operand(e.X)
		}
		y, oky := flatten(e.Y)
		if !oky {
			y = operand(e.Y)
		}
		return x + y, okx || oky
	case *ast.ParenExpr:
		return flatten(e.X)
	}
	return "", false
}

// operand names a non-literal part of a concatenation.
func operand(e ast.Expr) string {
	if c, ok := e.(*ast.CallExpr); ok {
		name := ""
		switch f := c.Fun.(type) {
		case *ast.SelectorExpr:
			name = f.Sel.Name
		case *ast.Ident:
			name = f.Name
		}
		switch name {
		case "Job":
			return "river_job"
		case "Queue":
			return "river_queue"
		}
	}
	return "?"
}

// statementSQL finds a statement in a string: SELECT ... FROM, WITH name AS,
// INSERT INTO, UPDATE ... SET, DELETE FROM.
var statementSQL = regexp.MustCompile(`(?is)\bselect\b.+\bfrom\b|\bwith\s+[a-z_]+\s+as\b|\binsert\s+into\b|\bupdate\b.+\bset\b|\bdelete\s+from\b`)

// tableSQL finds a table triage or River owns in a statement; "?" is a
// table name the source computes (see operand).
var tableSQL = regexp.MustCompile(`(?i)\b(?:triage|river)_[a-z_]+\b|\bfrom\s+\?`)

// readers are the packages that may run a statement on triage's or River's
// tables, reading included: the owners (a statement of one may read the
// other's tables, as a join or a condition) and the migrations.
var readers = map[string]bool{"ledger": true, "worker/rivertable": true, "migrations": true}

// Every statement on a table triage or River owns, reads included, is in an
// owner: code elsewhere calls the owner's function, so a table's rows are
// read and written in one place that keeps its invariants. Test helpers
// (packages named *test) and tests are left out.
func TestOnlyTheOwnersRunStatements(t *testing.T) {
	t.Parallel()
	var bad []string
	eachSource(t, func(rel, dir, path string) {
		if readers[dir] {
			return
		}
		stringsIn(t, path, func(s string, line int) {
			if !statementSQL.MatchString(s) {
				return
			}
			if table := tableSQL.FindString(s); table != "" {
				bad = append(bad, rel+":"+strconv.Itoa(line)+" runs a statement on "+table)
			}
		})
	})
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("statements outside ledger and worker/rivertable (move them to the table's owner):\n%s", strings.Join(bad, "\n"))
	}
}
