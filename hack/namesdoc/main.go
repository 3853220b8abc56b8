// Command namesdoc writes the reference of jobferry's names,
// docs/reference/names.md: every label and annotation it reads or writes,
// the Event reasons it records, the reasons a waiting Job's Suspended
// condition shows, the WorkerCluster conditions and their reasons, and the
// codes a worker is left out of a placement with — each read from the
// constant that defines it, with that constant's comment.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/jobferry/jobferry/manager/jobs/policy"
)

// section is one table of the reference: the constants of files whose
// names keep says belong to it.
type section struct {
	title, intro string
	files        []string
	keep         func(name string) bool
	// extra rows, from tables rather than constants.
	extra func() []row
}

type row struct{ value, name, doc string }

func suffix(s ...string) func(string) bool {
	return func(name string) bool {
		for _, x := range s {
			if strings.HasSuffix(name, x) {
				return true
			}
		}
		return false
	}
}

func prefix(p string) func(string) bool {
	return func(name string) bool { return strings.HasPrefix(name, p) }
}

func sections() []section {
	return []section{
		{
			title: "Labels", intro: "On manager Jobs, mirrors, namespaces and nodes. Every key under `jobferry.dev/` is jobferry's: a tenant's value for one is not trusted (see [the security model](../concepts/security-model.md)).",
			files: []string{"api/v1alpha1/names.go"}, keep: suffix("Label", "LabelPrefix"),
		},
		{
			title: "Annotations", intro: "On manager Jobs and mirrors.",
			files: []string{"api/v1alpha1/names.go"}, keep: suffix("Annotation"),
		},
		{
			title: "Event reasons on manager Jobs", intro: "What `kubectl describe job` shows of jobferry's work on a Job. [Troubleshooting](../tasks/troubleshooting.md) says what to do about each Warning.",
			files: []string{"manager/jobs/policy/reasons.go"}, keep: prefix("Reason"),
			extra: refusals,
		},
		{
			title: "Why a Job waits", intro: "The reason of a waiting manager Job's `Suspended` condition.",
			files: []string{"manager/jobs/policy/waiting.go"}, keep: prefix("Reason"),
		},
		{
			title: "WorkerCluster conditions and reasons", intro: "`kubectl get workerclusters` shows them; `kubectl jobferry status` summarises them.",
			files: []string{"api/v1alpha1/workercluster_types.go"}, keep: func(n string) bool { return prefix("Condition")(n) || prefix("Reason")(n) },
		},
		{
			title: "Why a worker is left out of a placement", intro: "The `code` label of `jobferry_placement_rejections_total`, and what `kubectl jobferry explain` says of each worker.",
			files: []string{"dispatch/place.go"}, keep: prefix("Reason"),
		},
	}
}

// refusals are the reasons of the Warning Events that say a write was
// refused, from policy.Writes.
func refusals() []row {
	var rows []row
	for _, w := range policy.Writes() {
		rows = append(rows, row{value: w.Reason, doc: fmt.Sprintf("The API server refused jobferry's write (%s); the Event carries its message and when the write is tried again.", w.Action)})
	}
	return rows
}

// constants are the string constants of file that keep selects, with their
// comments.
func constants(root, file string, keep func(string) bool) ([]row, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(root, file), nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	var rows []row
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !keep(name.Name) || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				value, err := strconv.Unquote(lit.Value)
				if err != nil {
					return nil, err
				}
				doc := vs.Doc.Text()
				if doc == "" {
					doc = vs.Comment.Text()
				}
				if doc == "" && len(gen.Specs) == 1 {
					// const Name = "..." with its comment above.
					doc = gen.Doc.Text()
				}
				if doc == "" {
					return nil, fmt.Errorf("%s: %s has no comment to say what it means", file, name.Name)
				}
				rows = append(rows, row{value: value, name: name.Name, doc: prose(name.Name, doc)})
			}
		}
	}
	return rows, nil
}

// prose is a constant's comment as one line, without its leading name.
func prose(name, doc string) string {
	doc = strings.Join(strings.Fields(doc), " ")
	doc = strings.TrimPrefix(doc, name+":")
	doc = strings.TrimPrefix(doc, name+" is ")
	doc = strings.TrimPrefix(doc, name+" ")
	doc = strings.TrimSpace(doc)
	if doc != "" {
		doc = strings.ToUpper(doc[:1]) + doc[1:]
	}
	return strings.ReplaceAll(doc, "|", `\|`)
}

// markdown is the reference of the sections, read from the tree at root.
func markdown(root string) (string, error) {
	var b strings.Builder
	b.WriteString("<!-- Generated by hack/namesdoc from the constants that define these names; do not edit. -->\n")
	b.WriteString("# Names: labels, annotations, Event reasons and conditions\n\n")
	b.WriteString("Every name jobferry writes or reads on Kubernetes objects, from the constant that defines it in the code.\n")
	for _, s := range sections() {
		var rows []row
		for _, file := range s.files {
			r, err := constants(root, file, s.keep)
			if err != nil {
				return "", err
			}
			rows = append(rows, r...)
		}
		if s.extra != nil {
			rows = append(rows, s.extra()...)
		}
		if len(rows) == 0 {
			return "", fmt.Errorf("section %q has no names", s.title)
		}
		sort.SliceStable(rows, func(i, j int) bool { return rows[i].value < rows[j].value })
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n| name | meaning |\n|---|---|\n", s.title, s.intro)
		seen := map[string]bool{}
		for _, r := range rows {
			if seen[r.value] {
				continue
			}
			seen[r.value] = true
			fmt.Fprintf(&b, "| `%s` | %s |\n", r.value, r.doc)
		}
	}
	return b.String(), nil
}

func main() {
	out := flag.String("out", "docs/reference/names.md", "file to write")
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	doc, err := markdown(*root)
	if err == nil {
		err = os.WriteFile(*out, []byte(doc), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "namesdoc:", err)
		os.Exit(1)
	}
}
