//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/jobferry/jobferry/devtools/devenv"
	"github.com/jobferry/jobferry/devtools/localcluster"
)

// helm runs the real bin/helm against a cluster.
func helm(ctx context.Context, t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	return helmWith(ctx, t, "helm", kubeconfig, args...)
}

// helmWith is helm with another helm of bin/ (helm4).
func helmWith(ctx context.Context, t *testing.T, binary, kubeconfig string, args ...string) string {
	t.Helper()
	out, err := helmMayFail(ctx, t, binary, kubeconfig, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", binary, strings.Join(args, " "), err, out)
	}
	return out
}

// manifestObjects splits a rendered release into objects.
func manifestObjects(t *testing.T, manifest string) []map[string]any {
	t.Helper()
	var out []map[string]any
	decoder := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		var obj map[string]any
		if err := decoder.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatal(err)
		}
		if obj != nil {
			out = append(out, obj)
		}
	}
}

func decodeInto(t *testing.T, obj map[string]any, into any) {
	t.Helper()
	data, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatal(err)
	}
}

// deploymentArgs are the arguments of a container of the release's one
// Deployment, as the chart rendered them.
func deploymentArgs(t *testing.T, objects []map[string]any, container string) []string {
	t.Helper()
	for _, obj := range objects {
		if obj["kind"] != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		decodeInto(t, obj, &d)
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == container {
				return slices.Clone(c.Args)
			}
		}
	}
	t.Fatalf("the release renders no Deployment with a container %s", container)
	return nil
}

// overrideArgs replaces the values of flags the chart rendered (each must be
// there: a renamed flag fails the test) and appends the added ones.
func overrideArgs(t *testing.T, args []string, replace map[string]func(old string) string, add ...string) []string {
	t.Helper()
	out := slices.Clone(args)
	for flag, value := range replace {
		found := false
		for i, arg := range out {
			if name, old, ok := strings.Cut(arg, "="); ok && name == flag {
				out[i] = flag + "=" + value(old)
				found = true
			}
		}
		if !found {
			t.Fatalf("the chart no longer renders %s (args: %q)", flag, args)
		}
	}
	return append(out, add...)
}

func fixed(v string) func(string) string { return func(string) string { return v } }

// grant is one (verb, resource) a rendered role gives a subject: in every
// namespace, or in one; on named objects only when names are set.
type grant struct {
	Role      string
	Namespace string // "" for a ClusterRole bound cluster-wide
	Verb      string
	Group     string
	Resource  string // with its subresource: jobs/status
	Names     []string
}

func (g grant) String() string {
	s := fmt.Sprintf("%s %s", g.Verb, g.Resource)
	if g.Group != "" {
		s += "." + g.Group
	}
	if len(g.Names) > 0 {
		s += " " + strings.Join(g.Names, ",")
	}
	if g.Namespace != "" {
		s += " in " + g.Namespace
	}
	return s + " (" + g.Role + ")"
}

// grantsTo lists what the rendered roles grant the ServiceAccount ns/name
// through the rendered bindings.
func grantsTo(t *testing.T, objects []map[string]any, ns, name string) []grant {
	t.Helper()
	clusterRoles := map[string][]rbacv1.PolicyRule{}
	roles := map[string][]rbacv1.PolicyRule{} // namespace/name
	var clusterBindings []rbacv1.ClusterRoleBinding
	var bindings []rbacv1.RoleBinding
	for _, obj := range objects {
		switch obj["kind"] {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			decodeInto(t, obj, &r)
			clusterRoles[r.Name] = r.Rules
		case "Role":
			var r rbacv1.Role
			decodeInto(t, obj, &r)
			roles[r.Namespace+"/"+r.Name] = r.Rules
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			decodeInto(t, obj, &b)
			clusterBindings = append(clusterBindings, b)
		case "RoleBinding":
			var b rbacv1.RoleBinding
			decodeInto(t, obj, &b)
			bindings = append(bindings, b)
		}
	}
	bound := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Namespace == ns && s.Name == name
		})
	}
	var out []grant
	expand := func(role, namespace string, rules []rbacv1.PolicyRule) {
		for _, r := range rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						out = append(out, grant{Role: role, Namespace: namespace, Verb: v, Group: g, Resource: res, Names: r.ResourceNames})
					}
				}
			}
		}
	}
	for _, b := range clusterBindings {
		if bound(b.Subjects) {
			expand(b.RoleRef.Name, "", clusterRoles[b.RoleRef.Name])
		}
	}
	for _, b := range bindings {
		if !bound(b.Subjects) {
			continue
		}
		if b.RoleRef.Kind == "ClusterRole" {
			expand(b.RoleRef.Name, b.Namespace, clusterRoles[b.RoleRef.Name])
		} else {
			expand(b.RoleRef.Name, b.Namespace, roles[b.Namespace+"/"+b.RoleRef.Name])
		}
	}
	return out
}

// auditEvent is what the audit policy of localcluster records of a request.
type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestURI string    `json:"requestURI"`
	Received   time.Time `json:"requestReceivedTimestamp"`
}

func (e auditEvent) resource() string {
	if e.ObjectRef == nil {
		return ""
	}
	if e.ObjectRef.Subresource != "" {
		return e.ObjectRef.Resource + "/" + e.ObjectRef.Subresource
	}
	return e.ObjectRef.Resource
}

// readAudit returns the audit events of user from a cluster's audit log.
func readAudit(t *testing.T, c *localcluster.Cluster, user string) []auditEvent {
	t.Helper()
	f, err := os.Open(c.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditEvent
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 16<<20)
	for scanner.Scan() {
		var e auditEvent
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			t.Fatalf("%s: %v", c.AuditLogPath(), err)
		}
		if e.User.Username == user && e.ObjectRef != nil {
			out = append(out, e)
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// usedBy reports whether an audit event made use of the grant.
func (g grant) usedBy(e auditEvent) bool {
	if e.Verb != g.Verb || e.ObjectRef.APIGroup != g.Group || e.resource() != g.Resource {
		return false
	}
	if g.Namespace != "" && e.ObjectRef.Namespace != g.Namespace && !(g.Resource == "namespaces" && e.ObjectRef.Name == g.Namespace) {
		return false
	}
	return len(g.Names) == 0 || slices.Contains(g.Names, e.ObjectRef.Name)
}

// checkLeastPrivilege fails, when everyGrantUsed, for every grant no audit
// event used, and always for every request the API server refused the user
// that no grant covers: a right the chart lacks. A refused request a grant
// covers is the authorizer of a restarted API server warming up.
func checkLeastPrivilege(t *testing.T, who string, grants []grant, events []auditEvent, everyGrantUsed bool) {
	t.Helper()
	var unused []string
	for _, g := range grants {
		if everyGrantUsed && !slices.ContainsFunc(events, g.usedBy) {
			unused = append(unused, g.String())
		}
	}
	sort.Strings(unused)
	for _, u := range unused {
		t.Errorf("%s: the chart grants %s, which no flow used", who, u)
	}
	refused := map[string]int{}
	warmUp := 0
	for _, e := range events {
		if e.ResponseStatus == nil || e.ResponseStatus.Code != 403 {
			continue
		}
		if slices.ContainsFunc(grants, func(g grant) bool { return g.usedBy(e) }) {
			warmUp++
			continue
		}
		refused[fmt.Sprintf("%s %s/%s %s/%s", e.Verb, e.ObjectRef.APIGroup, e.resource(), e.ObjectRef.Namespace, e.ObjectRef.Name)]++
	}
	for r, n := range refused {
		t.Errorf("%s: the API server refused %s (%d times), which the chart does not grant", who, r, n)
	}
	t.Logf("%s: %d grants (each used: %t); %d requests audited, %d refused while an API server started", who, len(grants), everyGrantUsed, len(events), warmUp)
}

// tokenKubeconfig writes a kubeconfig for a ServiceAccount of a cluster
// (devenv.TokenKubeconfig, valid for an hour) to path, unless empty.
func tokenKubeconfig(ctx context.Context, t *testing.T, c *localcluster.Cluster, ns, sa, path string) []byte {
	t.Helper()
	data, err := devenv.TokenKubeconfig(ctx, c, ns, sa, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if path != "" {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return data
}

func waitReady(ctx context.Context, t *testing.T, p *localcluster.Process, url string) {
	t.Helper()
	if err := localcluster.WaitHealthy(ctx, p, url, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
}
