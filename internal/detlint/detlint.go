// Package detlint owns the determinism lint for the Paxos core and the
// simulator: it type-checks a package's non-test sources and reports every
// construct that could make a run depend on something other than its seed:
// goroutines, select, the real clock, global or crypto randomness, and
// iterating over a map (a range over a map, or the unordered iterators
// maps.Keys, maps.Values and maps.All unless sorted at once by slices.Sorted
// or slices.SortedFunc).
//
// Iterating over a map is sometimes harmless (collecting keys to sort, or a
// reduction whose result does not depend on order). Such a loop or call is
// allowed when the line before it carries the directive
//
//	//detlint:maprange <why the order cannot matter>
//
// Packages lists the packages held to this contract; the test in this
// package and cmd/detlint (run by make lint) check every one of them.
package detlint

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Packages are the directories, relative to the module root, that must be
// deterministic. Add a package here when it joins the contract.
var Packages = []string{
	"paxos",
	"cron/replica",
	"cron/schedule",
	"cron/launcher",
	"cron/scheduler",
	"cron/state",
	"sim/simclock",
	"sim/simnet",
	"sim/simnomad",
	"sim/check",
	"internal/mapshrink",
}

// Finding is one forbidden construct.
type Finding struct {
	Pos    token.Position
	Reason string
}

func (f Finding) String() string { return fmt.Sprintf("%s: %s", f.Pos, f.Reason) }

// allowDirective marks a map range whose order cannot matter.
const allowDirective = "//detlint:maprange"

// forbiddenTime are the time functions that read or wait on the real clock.
var forbiddenTime = []string{"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick"}

// allowedRand are the math/rand(/v2) package-level names that build a
// seeded source instead of drawing from the global one.
var allowedRand = []string{"New", "NewPCG", "NewChaCha8", "NewZipf", "NewSource", "Rand", "Source", "PCG", "ChaCha8", "Zipf"}

// mapIterators are the functions, by package, whose result yields a map's
// entries in an unspecified order.
var mapIterators = map[string][]string{
	"maps":                  {"Keys", "Values", "All"},
	"golang.org/x/exp/maps": {"Keys", "Values"},
}

// sorters are the slices functions that put an iterator's output in order.
var sorters = []string{"Sorted", "SortedFunc", "SortedStableFunc"}

// Dir lints the package in dir (non-test .go files only).
func Dir(dir string) ([]Finding, error) {
	fset := token.NewFileSet()
	files, err := parseDir(fset, dir)
	if err != nil {
		return nil, err
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}}
	exports, err := exportFiles(dir)
	if err != nil {
		return nil, err
	}
	lookup := func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("detlint: no export data for %q", path)
		}
		return os.Open(file)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
	if _, err := conf.Check(dir, fset, files, info); err != nil {
		return nil, fmt.Errorf("detlint: type-checking %s: %w", dir, err)
	}
	var out []Finding
	for _, f := range files {
		out = append(out, lintFile(fset, f, info)...)
	}
	return out, nil
}

// exportFiles asks the go command to compile dir's dependencies and returns
// where each one's export data lies, which is much faster than
// type-checking them from source.
func exportFiles(dir string) (map[string]string, error) {
	cmd := exec.Command("go", "list", "-deps", "-export", "-f", "{{.ImportPath}}={{.Export}}", ".")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("detlint: go list in %s: %w", dir, err)
	}
	exports := make(map[string]string)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, file, ok := strings.Cut(line, "="); ok && file != "" {
			exports[path] = file
		}
	}
	return exports, nil
}

func parseDir(fset *token.FileSet, dir string) ([]*ast.File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("detlint: %w", err)
	}
	var files []*ast.File
	for _, e := range entries { // os.ReadDir sorts by name
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("detlint: %w", err)
		}
		files = append(files, f)
	}
	return files, nil
}

func lintFile(fset *token.FileSet, f *ast.File, info *types.Info) []Finding {
	allowed := allowedLines(fset, f)
	sorted := sortedIterators(f, info)
	var out []Finding
	report := func(n ast.Node, format string, args ...any) {
		out = append(out, Finding{Pos: fset.Position(n.Pos()), Reason: fmt.Sprintf(format, args...)})
	}
	for _, imp := range f.Imports {
		if imp.Path.Value == `"crypto/rand"` {
			report(imp, "imports crypto/rand")
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			report(n, "starts a goroutine")
		case *ast.SelectStmt:
			report(n, "uses select")
		case *ast.RangeStmt:
			if isMap(info, n.X) && !allowed[fset.Position(n.Pos()).Line-1] {
				report(n, "ranges over a map (add %s <reason> on the line before if order cannot matter)", allowDirective)
			}
		case *ast.SelectorExpr:
			if reason := forbiddenSelector(info, n); reason != "" {
				report(n, "%s", reason)
			}
		case *ast.CallExpr:
			if name := mapIterator(info, n); name != "" && !sorted[n] && !allowed[fset.Position(n.Pos()).Line-1] {
				report(n, "iterates over a map in random order (%s; wrap it in slices.Sorted or add %s <reason> on the line before)", name, allowDirective)
			}
		}
		return true
	})
	return out
}

// allowedLines returns the lines that carry the map-range directive.
func allowedLines(fset *token.FileSet, f *ast.File) map[int]bool {
	lines := make(map[int]bool)
	for _, g := range f.Comments {
		for _, c := range g.List {
			if strings.HasPrefix(c.Text, allowDirective) {
				lines[fset.Position(c.Pos()).Line] = true
			}
		}
	}
	return lines
}

func isMap(info *types.Info, x ast.Expr) bool {
	tv, ok := info.Types[x]
	if !ok {
		return false
	}
	_, isMap := tv.Type.Underlying().(*types.Map)
	return isMap
}

// sortedIterators returns the map-iterator calls passed straight to a
// slices sorter, whose order therefore cannot leak.
func sortedIterators(f *ast.File, info *types.Info) map[*ast.CallExpr]bool {
	ok := make(map[*ast.CallExpr]bool)
	ast.Inspect(f, func(n ast.Node) bool {
		call, isCall := n.(*ast.CallExpr)
		if !isCall || len(call.Args) == 0 {
			return true
		}
		path, name := calledFunc(info, call)
		if path != "slices" || !slices.Contains(sorters, name) {
			return true
		}
		if inner, isCall := call.Args[0].(*ast.CallExpr); isCall {
			ok[inner] = true
		}
		return true
	})
	return ok
}

// mapIterator returns "pkg.Name" if call is one of mapIterators.
func mapIterator(info *types.Info, call *ast.CallExpr) string {
	path, name := calledFunc(info, call)
	if slices.Contains(mapIterators[path], name) {
		return path + "." + name
	}
	return ""
}

// calledFunc returns the package path and name of a call to pkg.Name
// (possibly instantiated, as in pkg.Name[T]), or "", "".
func calledFunc(info *types.Info, call *ast.CallExpr) (path, name string) {
	fun := call.Fun
	switch x := fun.(type) {
	case *ast.IndexExpr:
		fun = x.X
	case *ast.IndexListExpr:
		fun = x.X
	}
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok {
		return "", ""
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok {
		return "", ""
	}
	pkgName, ok := info.Uses[id].(*types.PkgName)
	if !ok {
		return "", ""
	}
	return pkgName.Imported().Path(), sel.Sel.Name
}

// forbiddenSelector names what is wrong with pkg.Name, if anything.
func forbiddenSelector(info *types.Info, sel *ast.SelectorExpr) string {
	id, ok := sel.X.(*ast.Ident)
	if !ok {
		return ""
	}
	pkgName, ok := info.Uses[id].(*types.PkgName)
	if !ok {
		return ""
	}
	path, name := pkgName.Imported().Path(), sel.Sel.Name
	switch path {
	case "time":
		if slices.Contains(forbiddenTime, name) {
			return "uses the real clock (time." + name + ")"
		}
	case "math/rand", "math/rand/v2":
		if !slices.Contains(allowedRand, name) {
			return "draws from global randomness (" + path + "." + name + ")"
		}
	}
	return ""
}
