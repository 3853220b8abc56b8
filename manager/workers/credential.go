package workers

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// A worker credential that is a service-account token with an expiry (what
// `kubectl jobferry join` writes: a TokenRequest token of the worker chart's
// ServiceAccount) is renewed by the manager before it expires: it asks the
// worker for a new token of that same ServiceAccount, writes it into the
// Secret and swaps it into the live connection, whose caches and watches go
// on undisturbed. The decisions are pure functions of the token's claims and
// the time; renewal.go does the I/O.

// DefaultRenewalThreshold is the fraction of a token's lifetime after which
// it is renewed, as the kubelet renews projected service-account tokens: a
// 24 h token is renewed 4.8 h before it expires, which leaves hours for a
// renewal that fails (a Warning Event and CredentialExpiring) to be fixed.
const DefaultRenewalThreshold = 0.8

// renewalRetry is how soon a renewal that failed is tried again.
const renewalRetry = 10 * time.Second

// tokenClaims are the claims of a JWT bearer token that matter here. They
// are read without verifying the signature: the worker verifies the token;
// the manager only learns from them when to renew it and for whom.
type tokenClaims struct {
	Subject  string   `json:"sub"`
	Audience audience `json:"aud"`
	IssuedAt int64    `json:"iat"`
	Expiry   int64    `json:"exp"`
	// Kubernetes is the service-account claim of tokens the API server
	// issues.
	Kubernetes *struct {
		Namespace      string `json:"namespace"`
		ServiceAccount *struct {
			Name string `json:"name"`
		} `json:"serviceaccount"`
	} `json:"kubernetes.io"`
}

// audience is the aud claim: a string or a list of strings.
type audience []string

func (a *audience) UnmarshalJSON(data []byte) error {
	var one string
	if err := json.Unmarshal(data, &one); err == nil {
		*a = audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(data, &many); err != nil {
		return fmt.Errorf("the aud claim is neither a string nor a list of strings: %w", err)
	}
	*a = many
	return nil
}

// parseToken returns the claims of a JWT, or nil for a token that is not one
// (a static token, say): such a token is used as it is, never renewed.
func parseToken(token string) *tokenClaims {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil
	}
	claims := &tokenClaims{}
	if err := json.Unmarshal(payload, claims); err != nil {
		return nil
	}
	return claims
}

// serviceAccount returns the ServiceAccount the token belongs to, if it is a
// service-account token.
func (c *tokenClaims) serviceAccount() (namespace, name string, ok bool) {
	if c == nil || c.Kubernetes == nil || c.Kubernetes.ServiceAccount == nil || c.Kubernetes.Namespace == "" || c.Kubernetes.ServiceAccount.Name == "" {
		return "", "", false
	}
	return c.Kubernetes.Namespace, c.Kubernetes.ServiceAccount.Name, true
}

// identity names who a token authenticates, so a new token of the same
// ServiceAccount is swapped into the live connection while a credential of
// someone else rebuilds it (and has its rights reviewed).
func identity(token string) string {
	if ns, name, ok := parseToken(token).serviceAccount(); ok {
		return "serviceaccount:" + ns + "/" + name
	}
	return "token:" + token
}

// renewalPlan is what the claims of a worker token say about its renewal.
type renewalPlan struct {
	// Expires: the token has an expiry; the rest is set only then.
	Expires bool
	// Renewable: it is a service-account token, which the manager can renew
	// with TokenRequest for that ServiceAccount.
	Renewable                 bool
	Namespace, ServiceAccount string
	IssuedAt, ExpiresAt       time.Time
	RenewAt                   time.Time
	// Lifetime of the token, asked for again when it is renewed.
	Lifetime time.Duration
	// Due: RenewAt has passed; Expired: ExpiresAt has.
	Due, Expired bool
}

// minTokenLifetime is the shortest lifetime the TokenRequest API issues.
const minTokenLifetime = 10 * time.Minute

// planRenewal decides when the token of claims is renewed: once threshold
// (0 < threshold < 1) of its lifetime has passed.
func planRenewal(claims *tokenClaims, threshold float64, now time.Time) renewalPlan {
	if claims == nil || claims.Expiry == 0 {
		return renewalPlan{}
	}
	plan := renewalPlan{Expires: true, ExpiresAt: time.Unix(claims.Expiry, 0)}
	plan.Namespace, plan.ServiceAccount, plan.Renewable = claims.serviceAccount()
	plan.IssuedAt = time.Unix(claims.IssuedAt, 0)
	if claims.IssuedAt == 0 || claims.IssuedAt >= claims.Expiry {
		// No usable issue time: assume the shortest lifetime, so renewal
		// comes early rather than late.
		plan.IssuedAt = plan.ExpiresAt.Add(-minTokenLifetime)
	}
	plan.Lifetime = plan.ExpiresAt.Sub(plan.IssuedAt)
	plan.RenewAt = plan.IssuedAt.Add(time.Duration(float64(plan.Lifetime) * threshold))
	plan.Due = !now.Before(plan.RenewAt)
	plan.Expired = !now.Before(plan.ExpiresAt)
	return plan
}

// credentialStatus is the WorkerCluster's status.credential for a token.
func credentialStatus(claims *tokenClaims, plan renewalPlan) *v1alpha1.CredentialStatus {
	if claims == nil {
		return nil
	}
	out := &v1alpha1.CredentialStatus{}
	if ns, name, ok := claims.serviceAccount(); ok {
		out.ServiceAccount = ns + "/" + name
	}
	if claims.IssuedAt != 0 {
		out.IssuedAt = &metav1.Time{Time: time.Unix(claims.IssuedAt, 0)}
	}
	if plan.Expires {
		out.ExpiresAt = &metav1.Time{Time: plan.ExpiresAt}
		if plan.Renewable {
			out.RenewAt = &metav1.Time{Time: plan.RenewAt}
		}
	}
	return out
}

// credentialCondition is the CredentialRenewal condition after a reconcile
// whose renewal failed (renewErr) or that had none to fail; nil for a
// credential that does not expire. Its message names times, never a time
// left, so an unchanged credential never rewrites the status; a renewal
// shows in status.credential, an Event and a metric.
func credentialCondition(plan renewalPlan, renewErr error) *metav1.Condition {
	if !plan.Expires {
		return nil
	}
	cond := &metav1.Condition{Type: v1alpha1.ConditionCredentialRenewal}
	expires := "expires at " + plan.ExpiresAt.UTC().Format(time.RFC3339)
	switch {
	case plan.Expired:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonCredentialExpired
		cond.Message = fmt.Sprintf("the token expired at %s; the worker refuses it: register the worker again (kubectl jobferry join)", plan.ExpiresAt.UTC().Format(time.RFC3339))
	case renewErr != nil:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonCredentialExpiring
		cond.Message = fmt.Sprintf("renewing the token failed: %v; the current token %s and Jobs continue on it until then", renewErr, expires)
	case !plan.Renewable && plan.Due:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonCredentialExpiring
		cond.Message = fmt.Sprintf("the token %s and is not a service-account token the manager can renew: register the worker again (kubectl jobferry join)", expires)
	case !plan.Renewable:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ReasonCredentialValid
		cond.Message = fmt.Sprintf("the token %s; it is not a service-account token, so the manager cannot renew it", expires)
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ReasonCredentialValid
		cond.Message = fmt.Sprintf("the token of ServiceAccount %s/%s %s; the manager renews it at %s", plan.Namespace, plan.ServiceAccount, expires, plan.RenewAt.UTC().Format(time.RFC3339))
	}
	return cond
}

// kubeconfigToken returns the bearer token of a kubeconfig's current user.
func kubeconfigToken(data []byte) (string, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return "", err
	}
	kctx := cfg.Contexts[cfg.CurrentContext]
	if kctx == nil || cfg.AuthInfos[kctx.AuthInfo] == nil {
		return "", fmt.Errorf("the kubeconfig has no user for its current context %q", cfg.CurrentContext)
	}
	return cfg.AuthInfos[kctx.AuthInfo].Token, nil
}

// withToken returns the kubeconfig with its current user's token replaced,
// everything else as it was.
func withToken(data []byte, token string) ([]byte, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, err
	}
	kctx := cfg.Contexts[cfg.CurrentContext]
	if kctx == nil || cfg.AuthInfos[kctx.AuthInfo] == nil {
		return nil, fmt.Errorf("the kubeconfig has no user for its current context %q", cfg.CurrentContext)
	}
	cfg.AuthInfos[kctx.AuthInfo].Token = token
	return clientcmd.Write(*cfg)
}

// swappableToken authenticates every request of a worker connection with
// the current token, which a renewal replaces without rebuilding the
// connection: the caches, their watches and the assumed capacity stay.
type swappableToken struct {
	token atomic.Pointer[string]
}

func (s *swappableToken) set(token string) { s.token.Store(&token) }

func (s *swappableToken) get() string {
	if t := s.token.Load(); t != nil {
		return *t
	}
	return ""
}

// install moves the config's bearer token into s and has every transport
// built from the config ask s for it.
func (s *swappableToken) install(cfg *rest.Config) {
	s.set(cfg.BearerToken)
	cfg.BearerToken = ""
	cfg.BearerTokenFile = ""
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &bearerRoundTripper{token: s, next: rt}
	})
}

type bearerRoundTripper struct {
	token *swappableToken
	next  http.RoundTripper
}

func (b *bearerRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	token := b.token.get()
	if token == "" || req.Header.Get("Authorization") != "" {
		return b.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+token)
	return b.next.RoundTrip(req)
}

// WrappedRoundTripper lets client-go's debugging wrappers see through it.
func (b *bearerRoundTripper) WrappedRoundTripper() http.RoundTripper { return b.next }
