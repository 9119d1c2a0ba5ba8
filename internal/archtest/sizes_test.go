package archtest

import (
	"fmt"
	"go/ast"
	"sort"
	"strings"
	"testing"
)

// The sizes a newcomer can read in an afternoon (issue 47).
const (
	maxMethods   = 40  // per type, unexported and promoted ones included
	maxFuncLines = 100 // per function outside bench/
	longFunc     = 80  // a function over this says why in its doc comment ("long because")
	maxFiles     = 20  // non-test files per package
)

// ratchet are the places still over a limit, each with its figure today:
// the test fails if one grows, or shrinks without its line following, or
// is no longer over (then delete its line).
var ratchet = map[string]int{}

func TestSizes(t *testing.T) {
	fset, pkgs := parseTree(t)
	over := map[string]int{}
	unexplained := map[string]int{}
	methods := methodSets(pkgs)
	for key, n := range methods {
		if n > maxMethods {
			over["methods "+key] = n
		}
	}
	for _, k := range pkgs {
		if len(k.files) > maxFiles {
			over["files "+k.dir] = len(k.files)
		}
		if k.dir == "bench" || strings.HasPrefix(k.dir, "bench/") {
			continue
		}
		for i, f := range k.files {
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok {
					continue
				}
				lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
				name := fmt.Sprintf("%s %s", k.names[i], funcName(fn))
				if lines > maxFuncLines {
					over["lines "+name] = lines
				}
				if lines > longFunc && !strings.Contains(strings.ToLower(fn.Doc.Text()), "long because") {
					unexplained["unexplained "+name] = lines
				}
			}
		}
	}
	var msgs []string
	for key, n := range unexplained {
		if _, ok := ratchet[key]; !ok {
			msgs = append(msgs, fmt.Sprintf("%s is %d lines: say why in its doc comment (\"long because …\") or split it", strings.TrimPrefix(key, "unexplained "), n))
		}
		over[key] = n
	}
	for key, n := range over {
		switch was, ok := ratchet[key]; {
		case !ok:
			msgs = append(msgs, fmt.Sprintf("%s: %d, over the limit", key, n))
		case n > was:
			msgs = append(msgs, fmt.Sprintf("%s: %d, grew from %d", key, n, was))
		case n < was:
			msgs = append(msgs, fmt.Sprintf("%s: %d, down from %d: write %d in its ratchet line", key, n, was, n))
		}
	}
	for key, was := range ratchet {
		if _, ok := over[key]; !ok {
			msgs = append(msgs, fmt.Sprintf("%s: within the limit now (was %d): delete its ratchet line", key, was))
		}
	}
	sort.Strings(msgs)
	for _, m := range msgs {
		t.Error(m)
	}
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil {
		return fn.Name.Name
	}
	return recvType(fn.Recv.List[0].Type) + "." + fn.Name.Name
}

func recvType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvType(e.X)
	case *ast.IndexExpr:
		return recvType(e.X)
	case *ast.IndexListExpr:
		return recvType(e.X)
	case *ast.Ident:
		return e.Name
	}
	return "?"
}

// methodSets counts each type's methods, declared and promoted from the
// project's types it embeds, keyed "dir.Type".
func methodSets(pkgs []*pkg) map[string]int {
	declared := map[string]map[string]bool{} // "dir.Type" → method names
	embeds := map[string][]string{}          // "dir.Type" → "dir.Type" it embeds
	for _, k := range pkgs {
		for _, f := range k.files {
			alias := map[string]string{} // import name → dir
			for _, im := range f.Imports {
				p := strings.Trim(im.Path.Value, `"`)
				rest, ok := strings.CutPrefix(p, module+"/")
				if !ok {
					continue
				}
				name := rest[strings.LastIndex(rest, "/")+1:]
				if im.Name != nil {
					name = im.Name.Name
				}
				alias[name] = rest
			}
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Recv == nil {
						continue
					}
					key := k.dir + "." + recvType(d.Recv.List[0].Type)
					if declared[key] == nil {
						declared[key] = map[string]bool{}
					}
					declared[key][d.Name.Name] = true
				case *ast.GenDecl:
					for _, s := range d.Specs {
						ts, ok := s.(*ast.TypeSpec)
						if !ok {
							continue
						}
						st, ok := ts.Type.(*ast.StructType)
						if !ok {
							continue
						}
						key := k.dir + "." + ts.Name.Name
						for _, field := range st.Fields.List {
							if len(field.Names) > 0 {
								continue
							}
							e := field.Type
							if s, ok := e.(*ast.StarExpr); ok {
								e = s.X
							}
							switch e := e.(type) {
							case *ast.Ident:
								embeds[key] = append(embeds[key], k.dir+"."+e.Name)
							case *ast.SelectorExpr:
								if x, ok := e.X.(*ast.Ident); ok && alias[x.Name] != "" {
									embeds[key] = append(embeds[key], alias[x.Name]+"."+e.Sel.Name)
								}
							}
						}
					}
				}
			}
		}
	}
	var all func(key string, seen map[string]bool, into map[string]bool)
	all = func(key string, seen map[string]bool, into map[string]bool) {
		if seen[key] {
			return
		}
		seen[key] = true
		for m := range declared[key] {
			into[m] = true
		}
		for _, e := range embeds[key] {
			all(e, seen, into)
		}
	}
	out := map[string]int{}
	for key := range declared {
		set := map[string]bool{}
		all(key, map[string]bool{}, set)
		out[key] = len(set)
	}
	for key := range embeds {
		if _, ok := out[key]; !ok {
			set := map[string]bool{}
			all(key, map[string]bool{}, set)
			out[key] = len(set)
		}
	}
	return out
}
