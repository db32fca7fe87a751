package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The size limits of production code (docs/architecture.md, "Size limits
// and the exceptions kept"): a file that grows past maxFileLines, or a
// function past maxFuncLines, does more than one thing, and is split by
// what its parts do.
const (
	maxFileLines = 800
	maxFuncLines = 100
)

// sizeExceptions are the files ("dir/file.go") and functions
// ("dir/file.go:Func" or "dir/file.go:Recv.Method") allowed over the
// limits, each with the reason it is kept. An exception that is no longer
// over its limit fails the test, so the list only shrinks.
var sizeExceptions = map[string]string{}

// TestSizes parses every non-test Go file of the module and fails on a
// file or a function over the limits that is not an exception, and on an
// exception that is no longer needed.
func TestSizes(t *testing.T) {
	root := moduleRoot(t)
	over := map[string]string{} // what is over a limit, to how much
	files := 0
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
			over[rel] = fmt.Sprintf("%d lines (limit %d)", n, maxFileLines)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if n > maxFuncLines {
				over[rel+":"+funcName(fn)] = fmt.Sprintf("%d lines (limit %d)", n, maxFuncLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("only %d Go files found under %s", files, root)
	}
	for _, what := range slices.Sorted(maps.Keys(over)) {
		if _, ok := sizeExceptions[what]; !ok {
			t.Errorf("%s is %s: split it by what its parts do (or, with a reason, list it in sizeExceptions and docs/architecture.md)", what, over[what])
		}
	}
	for _, what := range slices.Sorted(maps.Keys(sizeExceptions)) {
		if _, ok := over[what]; !ok {
			t.Errorf("%s is an exception to the size limits but is no longer over them (or no longer exists): remove it from sizeExceptions and docs/architecture.md", what)
		}
	}
}

// funcName is a function's name, or a method's as Recv.Method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	for {
		switch x := typ.(type) {
		case *ast.StarExpr:
			typ = x.X
			continue
		case *ast.IndexExpr:
			typ = x.X
			continue
		case *ast.IndexListExpr:
			typ = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fn.Name.Name
		}
		return fn.Name.Name
	}
}

// moduleRoot is the directory of the module's go.mod, above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
