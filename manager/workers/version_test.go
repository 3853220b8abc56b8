package workers

import (
	"strings"
	"testing"
)

// A worker's /version is kept only when it is a Kubernetes version of
// bounded size; anything else fails the read, saying why.
func TestParseVersion(t *testing.T) {
	cases := map[string]struct {
		raw     string
		want    string // GitVersion kept; "" when refused
		minor   uint
		refusal string
	}{
		"a release":                    {raw: `{"major":"1","minor":"32","gitVersion":"v1.32.13"}`, want: "v1.32.13", minor: 32},
		"a provider's build":           {raw: `{"gitVersion":"v1.33.5-eks-3025e55"}`, want: "v1.33.5-eks-3025e55", minor: 33},
		"a GKE build":                  {raw: `{"gitVersion":"v1.32.9-gke.1072000"}`, want: "v1.32.9-gke.1072000", minor: 32},
		"a development build":          {raw: `{"gitVersion":"v1.37.0-alpha.1.120+0123456789abcd"}`, want: "v1.37.0-alpha.1.120+0123456789abcd", minor: 37},
		"not JSON":                     {raw: `<html>`, refusal: "/version"},
		"no version":                   {raw: `{}`, refusal: "is not a Kubernetes version"},
		"a version as prose":           {raw: `{"gitVersion":"v1.36.3 (trust me)"}`, refusal: "is not a Kubernetes version"},
		"a long suffix":                {raw: `{"gitVersion":"v1.36.3-` + strings.Repeat("a", 60) + `"}`, refusal: "is not a Kubernetes version"},
		"too large":                    {raw: `{"gitVersion":"v1.36.3","x":"` + strings.Repeat("a", maxVersionBytes) + `"}`, refusal: "more than"},
		"longer than the status takes": {raw: `{"gitVersion":"v1.32.1844674407370955161-` + strings.Repeat("a", 48) + `"}`, refusal: "is not a Kubernetes version"},
		"the longest kept, as long as the status takes": {raw: `{"gitVersion":"v1000.1000.1000-` + strings.Repeat("a", 48) + `"}`, want: "v1000.1000.1000-" + strings.Repeat("a", 48), minor: 1000},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v, err := parseVersion([]byte(tc.raw))
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), tc.refusal) {
					t.Fatalf("parseVersion = %v, %v; want an error saying %q", v, err, tc.refusal)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(v.GitVersion) > maxGitVersion {
				t.Errorf("kept %d characters, more than the status takes", len(v.GitVersion))
			}
			if v.GitVersion != tc.want || v.Parsed.Minor() != tc.minor {
				t.Errorf("parseVersion = %s (%d.%d), want %s", v.GitVersion, v.Parsed.Major(), v.Parsed.Minor(), tc.want)
			}
		})
	}
}
