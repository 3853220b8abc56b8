package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// referenceOut, when set, is where TestCommandReferenceIsCurrent writes the
// reference instead of checking it (hack/generate.sh).
var referenceOut = flag.String("reference-out", "", "write the command reference to this file instead of checking docs/reference/kubectl-jobferry.md")

const referencePath = "../../docs/reference/kubectl-jobferry.md"

// commandReference is docs/reference/kubectl-jobferry.md: every command's
// help, as cobra prints it in Markdown, on one page.
func commandReference() (string, error) {
	root := newRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard})
	// The completion command cobra adds when the plugin runs.
	root.InitDefaultCompletionCmd()
	var b bytes.Buffer
	b.WriteString("<!-- Generated from the commands' own help (cmd/kubectl-jobferry/reference_test.go); do not edit. -->\n")
	b.WriteString("# `kubectl jobferry` reference\n\n")
	b.WriteString("Every command of jobferry's kubectl plugin, with its flags, as `kubectl jobferry <command> --help` prints them.\n\n")
	// Links between commands point at their sections on this page.
	link := func(file string) string {
		return "#" + strings.ReplaceAll(strings.TrimSuffix(file, ".md"), "_", "-")
	}
	var walk func(c *cobra.Command) error
	walk = func(c *cobra.Command) error {
		if c != root && (!c.IsAvailableCommand() || c.IsAdditionalHelpTopicCommand()) {
			return nil
		}
		c.DisableAutoGenTag = true
		if err := doc.GenMarkdownCustom(c, &b, link); err != nil {
			return err
		}
		b.WriteString("\n")
		for _, sub := range c.Commands() {
			if err := walk(sub); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return "", err
	}
	return strings.TrimRight(b.String(), "\n") + "\n", nil
}

// The command reference is what the commands say of themselves.
func TestCommandReferenceIsCurrent(t *testing.T) {
	// Defaults under the home directory (--cache-dir) print as $HOME's,
	// the same on every machine.
	t.Setenv("HOME", "$HOME")
	want, err := commandReference()
	if err != nil {
		t.Fatal(err)
	}
	if *referenceOut != "" {
		if err := os.WriteFile(*referenceOut, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is stale: run `make generate`", referencePath)
	}
	for _, command := range []string{"join", "get jobs", "describe", "logs", "cordon", "remove", "version", "completion bash"} {
		if !strings.Contains(want, "## kubectl jobferry "+command) {
			t.Errorf("the reference has no section for kubectl jobferry %s", command)
		}
	}
}
