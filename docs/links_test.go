// Package docs holds jobferry's documentation; its test checks the links
// between the Markdown files of the repository.
package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// root is the repository, from this package's directory.
const root = ".."

var (
	// inlineLink is [text](target) and ![alt](target); the target ends at
	// the first space (a title may follow) or the closing parenthesis.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// referenceLink is a definition [label]: target.
	referenceLink = regexp.MustCompile(`^\s*\[[^\]]+\]:\s*(\S+)`)
	inlineCode    = regexp.MustCompile("`[^`]*`")
	htmlAnchor    = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

// markdownFiles are the repository's Markdown files, but what tools and
// builds leave in it.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "_output" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// slug is GitHub's anchor for a heading: lower case, punctuation but '-'
// and '_' dropped, spaces as '-'.
func slug(heading string) string {
	heading = inlineCode.ReplaceAllStringFunc(heading, func(s string) string { return strings.Trim(s, "`") })
	// Links in a heading count by their text.
	heading = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// document is what one Markdown file offers and asks: its anchors, and its
// links with the line each is on.
type document struct {
	anchors map[string]bool
	links   []link
}

type link struct {
	line   int
	target string
}

func parse(path string) (document, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return document{}, err
	}
	doc := document{anchors: map[string]bool{}}
	seen := map[string]int{}
	fenced := false
	for i, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if strings.HasPrefix(line, "#") {
			heading := strings.TrimLeft(line, "#")
			if strings.HasPrefix(heading, " ") {
				s := slug(heading)
				// A repeated heading's anchor gets -1, -2, ...
				if n := seen[s]; n > 0 {
					doc.anchors[fmt.Sprintf("%s-%d", s, n)] = true
				} else {
					doc.anchors[s] = true
				}
				seen[s]++
			}
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			doc.anchors[m[1]] = true
		}
		text := inlineCode.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
			doc.links = append(doc.links, link{line: i + 1, target: m[1]})
		}
		if m := referenceLink.FindStringSubmatch(text); m != nil {
			doc.links = append(doc.links, link{line: i + 1, target: m[1]})
		}
	}
	return doc, nil
}

// Every relative link of every Markdown file leads to a file of the
// repository, and every anchor to a heading there.
func TestRelativeLinksAndAnchorsResolve(t *testing.T) {
	files := markdownFiles(t)
	docs := map[string]document{}
	for _, f := range files {
		doc, err := parse(f)
		if err != nil {
			t.Fatal(err)
		}
		docs[filepath.Clean(f)] = doc
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		for _, l := range docs[filepath.Clean(f)].links {
			if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
				continue
			}
			checked++
			where := fmt.Sprintf("%s:%d: %s", strings.TrimPrefix(f, root+"/"), l.line, l.target)
			file, anchor, _ := strings.Cut(l.target, "#")
			target := filepath.Clean(f)
			if file != "" {
				target = filepath.Clean(filepath.Join(filepath.Dir(f), file))
			}
			abs, err := filepath.Abs(target)
			if err != nil {
				t.Fatal(err)
			}
			if abs != absRoot && !strings.HasPrefix(abs, absRoot+string(filepath.Separator)) {
				t.Errorf("%s leads outside the repository", where)
				continue
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s: no such file", where)
				continue
			}
			if anchor == "" {
				continue
			}
			doc, ok := docs[target]
			if !ok {
				t.Errorf("%s: an anchor into a file that is not Markdown", where)
				continue
			}
			if !doc.anchors[anchor] {
				t.Errorf("%s: no heading with that anchor", where)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the walk missed the docs")
	}
	t.Logf("%d relative links in %d Markdown files", checked, len(files))
}

// The anchors are GitHub's.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		" Install on real clusters":              "install-on-real-clusters",
		" `kubectl jobferry` reference":          "kubectl-jobferry-reference",
		" What a user sees (and why)":            "what-a-user-sees-and-why",
		" Jobs wait without a worker":            "jobs-wait-without-a-worker",
		" v1alpha1 → v1beta1":                    "v1alpha1--v1beta1",
		" The [threat model](x.md) in one table": "the-threat-model-in-one-table",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// Every alert's runbook_url (the manager chart's files/alerts.yaml) names a
// section of the troubleshooting page.
func TestAlertRunbooksResolve(t *testing.T) {
	const page = "https://github.com/jobferry/jobferry/blob/main/docs/tasks/troubleshooting.md#"
	troubleshooting, err := parse(filepath.Join(root, "docs", "tasks", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := os.ReadFile(filepath.Join(root, "charts", "jobferry-manager", "files", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	urls := regexp.MustCompile(`runbook_url: (\S+)`).FindAllStringSubmatch(string(alerts), -1)
	if len(urls) == 0 {
		t.Fatal("no runbook_url in the alerts")
	}
	for _, m := range urls {
		anchor, ok := strings.CutPrefix(m[1], page)
		if !ok || !troubleshooting.anchors[anchor] {
			t.Errorf("runbook_url %s: no such section of docs/tasks/troubleshooting.md", m[1])
		}
	}
}
