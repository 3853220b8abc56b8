// Command fileimports counts, inside each Go package it is given, the file
// imports that run back up: file A imports file B when A uses a name B
// declares at package level (a function, type, variable, constant or
// method; resolved by go/types). The files of a package are laid out
// bottom-up with the Eades–Lin–Smyth heuristic for a minimum feedback arc
// set (sinks to the bottom, sources to the top, else the file with the most
// more imports out than in on top); an import of a file laid out above the
// importer runs back up. Test files are left out.
//
//	go run ./hack/fileimports ./manager/...
//
// prints one line per package with files that import each other (files,
// imports, imports running back up, and the arrows themselves with -v) and
// the total.
package main

import (
	"bufio"
	"bytes"
	"flag"
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
	"sort"
	"strings"
)

func main() {
	verbose := flag.Bool("v", false, "print each import that runs back up")
	flag.Parse()
	if err := run(flag.Args(), *verbose, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fileimports:", err)
		os.Exit(1)
	}
}

type pkg struct {
	path, dir string
	files     []string
}

func run(patterns []string, verbose bool, out io.Writer) error {
	pkgs, err := list(patterns)
	if err != nil {
		return err
	}
	exports, err := exportData(patterns)
	if err != nil {
		return err
	}
	total := 0
	for _, p := range pkgs {
		edges, err := fileImports(p, exports)
		if err != nil {
			return err
		}
		back := backUp(p.files, edges)
		total += len(back)
		if len(edges) == 0 {
			continue
		}
		fmt.Fprintf(out, "%s: %d files, %d file imports, %d run back up\n", p.path, len(p.files), len(edges), len(back))
		if verbose {
			for _, e := range back {
				fmt.Fprintf(out, "\t%s -> %s\n", e[0], e[1])
			}
		}
	}
	fmt.Fprintf(out, "total: %d file imports run back up\n", total)
	return nil
}

func list(patterns []string) ([]pkg, error) {
	args := append([]string{"list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \",\"}}"}, patterns...)
	raw, err := exec.Command("go", args...).Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	var pkgs []pkg
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 3 || f[2] == "" {
			continue
		}
		pkgs = append(pkgs, pkg{path: f[0], dir: f[1], files: strings.Split(f[2], ",")})
	}
	return pkgs, sc.Err()
}

// exportData maps every dependency of the patterns to its compiled export
// data, for the type checker.
func exportData(patterns []string) (map[string]string, error) {
	args := append([]string{"list", "-deps", "-export", "-f", "{{.ImportPath}}\t{{.Export}}"}, patterns...)
	raw, err := exec.Command("go", args...).Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export: %w", err)
	}
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if path, file, ok := strings.Cut(line, "\t"); ok && file != "" {
			exports[path] = file
		}
	}
	return exports, nil
}

// fileImports are the pairs (importer, imported) of a package's files.
func fileImports(p pkg, exports map[string]string) ([][2]string, error) {
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range p.files {
		f, err := parser.ParseFile(fset, filepath.Join(p.dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	lookup := func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
	tpkg, err := conf.Check(p.path, fset, files, info)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.path, err)
	}
	declaredIn := func(obj types.Object) string {
		if obj == nil || obj.Pkg() != tpkg || !obj.Pos().IsValid() {
			return ""
		}
		if fn, ok := obj.(*types.Func); ok && fn.Type().(*types.Signature).Recv() != nil {
			return filepath.Base(fset.Position(obj.Pos()).Filename)
		}
		if obj.Parent() != tpkg.Scope() {
			return ""
		}
		return filepath.Base(fset.Position(obj.Pos()).Filename)
	}
	seen := map[[2]string]bool{}
	var edges [][2]string
	add := func(at token.Pos, obj types.Object) {
		from, to := filepath.Base(fset.Position(at).Filename), declaredIn(obj)
		if to == "" || to == from || seen[[2]string{from, to}] {
			return
		}
		seen[[2]string{from, to}] = true
		edges = append(edges, [2]string{from, to})
	}
	for id, obj := range info.Uses {
		add(id.Pos(), obj)
	}
	for sel, s := range info.Selections {
		add(sel.Pos(), s.Obj())
	}
	sort.Slice(edges, func(i, j int) bool {
		return edges[i][0]+" "+edges[i][1] < edges[j][0]+" "+edges[j][1]
	})
	return edges, nil
}

// backUp lays the files out (Eades, Lin and Smyth, 1993) and returns the
// imports from a file to one laid out above it.
func backUp(files []string, edges [][2]string) [][2]string {
	out, in := map[string]map[string]bool{}, map[string]map[string]bool{}
	left := map[string]bool{}
	for _, f := range files {
		out[f], in[f], left[f] = map[string]bool{}, map[string]bool{}, true
	}
	for _, e := range edges {
		out[e[0]][e[1]], in[e[1]][e[0]] = true, true
	}
	degree := func(f string, m map[string]map[string]bool) int {
		n := 0
		for g := range m[f] {
			if left[g] {
				n++
			}
		}
		return n
	}
	sorted := func() []string {
		var fs []string
		for f := range left {
			fs = append(fs, f)
		}
		sort.Strings(fs)
		return fs
	}
	var top, bottom []string // top: importers first; bottom: built up from the ground
	for len(left) > 0 {
		moved := true
		for moved {
			moved = false
			for _, f := range sorted() {
				if degree(f, out) == 0 { // imports nothing left: to the ground
					bottom = append([]string{f}, bottom...)
					delete(left, f)
					moved = true
				} else if degree(f, in) == 0 { // imported by nothing left: to the top
					top = append(top, f)
					delete(left, f)
					moved = true
				}
			}
		}
		if len(left) == 0 {
			break
		}
		best, bestDelta := "", 0
		for _, f := range sorted() {
			if d := degree(f, out) - degree(f, in); best == "" || d > bestDelta {
				best, bestDelta = f, d
			}
		}
		top = append(top, best)
		delete(left, best)
	}
	rank := map[string]int{} // 0 is the top floor
	for i, f := range append(top, bottom...) {
		rank[f] = i
	}
	var back [][2]string
	for _, e := range edges {
		if rank[e[1]] < rank[e[0]] {
			back = append(back, e)
		}
	}
	return back
}
