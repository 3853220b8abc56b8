package main

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

// Every flag that can be wrong is refused with a message naming it; the
// deprecated --job-workers still sets the concurrency.
func TestParseFlags(t *testing.T) {
	parse := func(args ...string) (config, error) {
		fs := flag.NewFlagSet("manager", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		return parseFlags(fs, args)
	}
	refused := map[string]struct {
		args []string
		says string
	}{
		"no concurrency":                 {[]string{"--concurrent-job-syncs=0"}, "--concurrent-job-syncs must be at least 1"},
		"a renewal threshold of 1":       {[]string{"--credential-renewal-threshold=1"}, "--credential-renewal-threshold must be between 0 and 1"},
		"rotation without a Secret":      {[]string{"--webhook-cert-rotation"}, "need --webhook-cert-secret"},
		"a selector that does not parse": {[]string{"--dispatch-namespace-selector=a b"}, `--dispatch-namespace-selector "a b"`},
		"an empty selector":              {[]string{"--dispatch-namespace-selector="}, "must select something"},
		"an unknown flag":                {[]string{"--job-worker=3"}, "job-worker"},
		"a negative namespace grace":     {[]string{"--worker-namespace-grace=-1m"}, "--worker-namespace-grace must not be negative"},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			_, err := parse(tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("parseFlags(%q) = %v, want an error saying %q", tc.args, err, tc.says)
			}
		})
	}

	c, err := parse("--job-workers=3", "--namespace=jf", "--reserved-namespaces=a, ,b ", "--webhook-service=svc.jf.svc", "--webhook-cert-extra-dns-names=m.jf.svc, ")
	if err != nil {
		t.Fatal(err)
	}
	if c.jobSyncs != 3 || !c.deprecatedJobWorkers {
		t.Errorf("--job-workers=3: concurrency %d (deprecated noted: %t), want 3", c.jobSyncs, c.deprecatedJobWorkers)
	}
	if !slices.Equal(c.reserved, []string{"a", "b", "jf"}) {
		t.Errorf("reserved %q, want a, b and the manager's namespace", c.reserved)
	}
	if !slices.Equal(c.certDNSNames, []string{"svc.jf.svc", "m.jf.svc"}) {
		t.Errorf("certificate DNS names %q", c.certDNSNames)
	}
	if c.dispatchNamespaces.String() != "jobferry.dev/dispatch=enabled" {
		t.Errorf("default dispatch selector %q", c.dispatchNamespaces)
	}
}
