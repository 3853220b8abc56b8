package workers

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// fakeJWT builds an unsigned token with the given claims: the manager never
// verifies signatures, the worker does.
func fakeJWT(t *testing.T, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc(payload) + ".c2lnbmF0dXJl"
}

func saClaims(ns, name string, iat, exp time.Time) map[string]any {
	return map[string]any{
		"sub": "system:serviceaccount:" + ns + ":" + name, "aud": []string{"https://kubernetes.default.svc"},
		"iat": iat.Unix(), "exp": exp.Unix(), "nbf": iat.Unix(),
		"kubernetes.io": map[string]any{"namespace": ns, "serviceaccount": map[string]any{"name": name, "uid": "u-1"}},
	}
}

func TestParseToken(t *testing.T) {
	iat := time.Unix(1_800_000_000, 0)
	claims := parseToken(fakeJWT(t, saClaims("jobferry-system", "jobferry-manager", iat, iat.Add(time.Hour))))
	if claims == nil {
		t.Fatal("a service-account JWT was not parsed")
	}
	if ns, name, ok := claims.serviceAccount(); !ok || ns != "jobferry-system" || name != "jobferry-manager" {
		t.Errorf("serviceAccount() = %q %q %t", ns, name, ok)
	}
	if len(claims.Audience) != 1 || claims.Audience[0] != "https://kubernetes.default.svc" {
		t.Errorf("audience %q", claims.Audience)
	}
	single := parseToken(fakeJWT(t, map[string]any{"aud": "one", "exp": 5}))
	if single == nil || len(single.Audience) != 1 || single.Audience[0] != "one" {
		t.Errorf("a string aud claim: %+v", single)
	}
	if _, _, ok := single.serviceAccount(); ok {
		t.Error("a token without the kubernetes.io claim counted as a service-account token")
	}
	for _, notJWT := range []string{"", "static-token", "a.b", "a.!!!.c", "a." + base64.RawURLEncoding.EncodeToString([]byte("not json")) + ".c"} {
		if parseToken(notJWT) != nil {
			t.Errorf("parseToken(%q) is not nil", notJWT)
		}
	}
}

func TestPlanRenewal(t *testing.T) {
	iat := time.Unix(1_800_000_000, 0)
	sa := func(lifetime time.Duration) *tokenClaims {
		return parseToken(fakeJWT(t, saClaims("ns", "sa", iat, iat.Add(lifetime))))
	}
	user := parseToken(fakeJWT(t, map[string]any{"sub": "alice", "iat": iat.Unix(), "exp": iat.Add(time.Hour).Unix()}))
	noIAT := parseToken(fakeJWT(t, map[string]any{"exp": iat.Add(time.Hour).Unix(), "kubernetes.io": map[string]any{"namespace": "ns", "serviceaccount": map[string]any{"name": "sa"}}}))
	for _, tc := range []struct {
		name      string
		claims    *tokenClaims
		threshold float64
		now       time.Time
		want      renewalPlan
	}{
		{name: "not a JWT", claims: nil, now: iat, want: renewalPlan{}},
		{name: "no expiry", claims: parseToken(fakeJWT(t, map[string]any{"sub": "x"})), now: iat, want: renewalPlan{}},
		{name: "24h token, fresh", claims: sa(24 * time.Hour), threshold: 0.8, now: iat.Add(time.Hour), want: renewalPlan{
			Expires: true, Renewable: true, Namespace: "ns", ServiceAccount: "sa", IssuedAt: iat, ExpiresAt: iat.Add(24 * time.Hour),
			RenewAt: iat.Add(24 * time.Hour * 8 / 10), Lifetime: 24 * time.Hour}},
		{name: "24h token at the threshold is due", claims: sa(24 * time.Hour), threshold: 0.8, now: iat.Add(24 * time.Hour * 8 / 10), want: renewalPlan{
			Expires: true, Renewable: true, Namespace: "ns", ServiceAccount: "sa", IssuedAt: iat, ExpiresAt: iat.Add(24 * time.Hour),
			RenewAt: iat.Add(24 * time.Hour * 8 / 10), Lifetime: 24 * time.Hour, Due: true}},
		{name: "expired", claims: sa(10 * time.Minute), threshold: 0.5, now: iat.Add(10 * time.Minute), want: renewalPlan{
			Expires: true, Renewable: true, Namespace: "ns", ServiceAccount: "sa", IssuedAt: iat, ExpiresAt: iat.Add(10 * time.Minute),
			RenewAt: iat.Add(5 * time.Minute), Lifetime: 10 * time.Minute, Due: true, Expired: true}},
		{name: "a user's token expires but is not renewable", claims: user, threshold: 0.5, now: iat, want: renewalPlan{
			Expires: true, IssuedAt: iat, ExpiresAt: iat.Add(time.Hour), RenewAt: iat.Add(30 * time.Minute), Lifetime: time.Hour}},
		{name: "no issue time: the shortest lifetime is assumed", claims: noIAT, threshold: 0.5, now: iat, want: renewalPlan{
			Expires: true, Renewable: true, Namespace: "ns", ServiceAccount: "sa", IssuedAt: iat.Add(50 * time.Minute), ExpiresAt: iat.Add(time.Hour),
			RenewAt: iat.Add(55 * time.Minute), Lifetime: 10 * time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := planRenewal(tc.claims, tc.threshold, tc.now)
			if got != tc.want {
				t.Errorf("planRenewal\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestCredentialCondition(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	valid := renewalPlan{Expires: true, Renewable: true, Namespace: "ns", ServiceAccount: "sa", ExpiresAt: now.Add(time.Hour), RenewAt: now.Add(30 * time.Minute)}
	due := valid
	due.Due = true
	expired := due
	expired.Expired, expired.ExpiresAt = true, now.Add(-time.Second)
	notRenewable := valid
	notRenewable.Renewable = false
	notRenewableDue := notRenewable
	notRenewableDue.Due = true
	for _, tc := range []struct {
		name    string
		plan    renewalPlan
		err     error
		status  metav1.ConditionStatus
		reason  string
		message []string
	}{
		{name: "valid", plan: valid, status: metav1.ConditionTrue, reason: v1alpha1.ReasonCredentialValid, message: []string{"ns/sa", "renews it at"}},
		{name: "renewal failed", plan: due, err: errors.New("forbidden"), status: metav1.ConditionFalse, reason: v1alpha1.ReasonCredentialExpiring, message: []string{"forbidden", "Jobs continue on it"}},
		{name: "expired", plan: expired, status: metav1.ConditionFalse, reason: v1alpha1.ReasonCredentialExpired, message: []string{"kubectl jobferry join"}},
		{name: "not renewable, not due", plan: notRenewable, status: metav1.ConditionTrue, reason: v1alpha1.ReasonCredentialValid, message: []string{"cannot renew it"}},
		{name: "not renewable, due", plan: notRenewableDue, status: metav1.ConditionFalse, reason: v1alpha1.ReasonCredentialExpiring, message: []string{"kubectl jobferry join"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cond := credentialCondition(tc.plan, tc.err)
			if cond == nil || cond.Type != v1alpha1.ConditionCredentialRenewal || cond.Status != tc.status || cond.Reason != tc.reason {
				t.Fatalf("condition %+v, want %s %s", cond, tc.status, tc.reason)
			}
			for _, m := range tc.message {
				if !strings.Contains(cond.Message, m) {
					t.Errorf("message %q lacks %q", cond.Message, m)
				}
			}
		})
	}
	if cond := credentialCondition(renewalPlan{}, nil); cond != nil {
		t.Errorf("a credential without expiry has condition %+v", cond)
	}
}

func kubeconfigWithToken(t *testing.T, server, token string) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["w"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: []byte("ca")}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "w", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestConnectionHashIgnoresRenewedTokens(t *testing.T) {
	iat := time.Unix(1_800_000_000, 0)
	first := fakeJWT(t, saClaims("ns", "sa", iat, iat.Add(time.Hour)))
	renewed := fakeJWT(t, saClaims("ns", "sa", iat.Add(time.Minute), iat.Add(time.Hour+time.Minute)))
	other := fakeJWT(t, saClaims("ns", "someone-else", iat, iat.Add(time.Hour)))
	hash := func(server, token string, namespaces ...string) string {
		return connectionHash(kubeconfigWithToken(t, server, token), token, namespaces)
	}
	if hash("https://w", first) != hash("https://w", renewed) {
		t.Error("a renewed token of the same ServiceAccount would rebuild the connection")
	}
	for name, h := range map[string]string{
		"another ServiceAccount": hash("https://w", other),
		"another server":         hash("https://v", first),
		"namespaces":             hash("https://w", first, "team-a"),
		"a static token":         hash("https://w", "static"),
	} {
		if h == hash("https://w", first) {
			t.Errorf("%s does not rebuild the connection", name)
		}
	}
	if hash("https://w", "static") == hash("https://w", "static-2") {
		t.Error("a changed static token does not rebuild the connection")
	}
}

func TestWithToken(t *testing.T) {
	data := kubeconfigWithToken(t, "https://w", "old")
	out, err := withToken(data, "new")
	if err != nil {
		t.Fatal(err)
	}
	if token, err := kubeconfigToken(out); err != nil || token != "new" {
		t.Fatalf("token %q, %v", token, err)
	}
	cfg, err := clientcmd.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Clusters["w"].Server != "https://w" || string(cfg.Clusters["w"].CertificateAuthorityData) != "ca" || cfg.CurrentContext != "c" {
		t.Errorf("withToken changed more than the token: %+v", cfg)
	}
	if _, err := withToken([]byte("current-context: nowhere\n"), "x"); err == nil {
		t.Error("a kubeconfig without the current context's user was accepted")
	}
}

// A swapped token is used by the next request of clients built before the
// swap: renewal needs no new connection.
func TestSwappableTokenReachesExistingClients(t *testing.T) {
	var seen []string
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"36"}`))
	}))
	defer server.Close()
	cfg := &rest.Config{Host: server.URL, BearerToken: "first"}
	token := &swappableToken{}
	token.install(cfg)
	if cfg.BearerToken != "" {
		t.Fatal("the static token stayed in the config")
	}
	client, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Discovery().ServerVersion(); err != nil {
		t.Fatal(err)
	}
	token.set("second")
	if _, err := client.Discovery().ServerVersion(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[0] != "Bearer first" || seen[1] != "Bearer second" {
		t.Errorf("Authorization headers %q, want the first then the second token", seen)
	}
}
