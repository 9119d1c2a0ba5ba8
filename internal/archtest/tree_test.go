package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "tally"

// pkg is one directory's non-test Go files, parsed.
type pkg struct {
	path  string // import path, "tally/…"
	dir   string // relative to the module root
	files []*ast.File
	names []string // the files' paths, relative to the module root
}

// parseTree parses every non-test Go file under the module root, with
// comments, grouped by directory.
func parseTree(t *testing.T) (*token.FileSet, []*pkg) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module root is not two directories up: %v", err)
	}
	fset := token.NewFileSet()
	byDir := map[string]*pkg{}
	var order []*pkg
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		rel = filepath.ToSlash(rel)
		k := byDir[rel]
		if k == nil {
			k = &pkg{path: module + "/" + rel, dir: rel}
			if rel == "." {
				k.path = module
			}
			byDir[rel] = k
			order = append(order, k)
		}
		name, _ := filepath.Rel(root, p)
		k.files = append(k.files, f)
		k.names = append(k.names, filepath.ToSlash(name))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fset, order
}

// imports are a package's imports of the project, without the module's
// name ("ledger", "internal/wire").
func (k *pkg) imports() map[string]string {
	out := map[string]string{} // import → the file that has it
	for i, f := range k.files {
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if rest, ok := strings.CutPrefix(p, module+"/"); ok {
				out[rest] = k.names[i]
			}
		}
	}
	return out
}

// stdImports are a package's imports from outside the project.
func (k *pkg) otherImports() map[string]string {
	out := map[string]string{}
	for i, f := range k.files {
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if p != module && !strings.HasPrefix(p, module+"/") {
				out[p] = k.names[i]
			}
		}
	}
	return out
}
