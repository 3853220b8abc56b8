package workers

import (
	"context"
	"errors"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
	"github.com/jobferry/jobferry/manager/metrics"
)

// Event reasons on a WorkerCluster for its credential.
const (
	ReasonCredentialRenewed       = "CredentialRenewed"
	ReasonCredentialRenewalFailed = "CredentialRenewalFailed"
)

// KeepCredential renews the worker's token when planRenewal says it is due,
// and returns the credential status and condition to write, and how soon to
// look again (0: no renewal to schedule).
func (p *Pool) KeepCredential(ctx context.Context, wc *v1alpha1.WorkerCluster, conn *Connection) (*v1alpha1.CredentialStatus, *metav1.Condition, time.Duration) {
	threshold := p.RenewalThreshold
	if threshold == 0 {
		threshold = DefaultRenewalThreshold
	}
	now := p.Clock.Now()
	claims := parseToken(conn.token.get())
	plan := planRenewal(claims, threshold, now)
	var renewErr error
	if plan.Renewable && plan.Due && !plan.Expired {
		var fresh *tokenClaims
		if fresh, renewErr = p.renewToken(ctx, wc, conn, plan, claims.Audience); renewErr == nil {
			claims, plan = fresh, planRenewal(fresh, threshold, now)
			metrics.CredentialRenewals.WithLabelValues(wc.Name, "renewed").Inc()
			p.Recorder.Eventf(wc, nil, corev1.EventTypeNormal, ReasonCredentialRenewed, "RenewCredential",
				"renewed the token of ServiceAccount %s/%s on the worker; it expires at %s", plan.Namespace, plan.ServiceAccount, plan.ExpiresAt.UTC().Format(time.RFC3339))
			logf.FromContext(ctx).Info("renewed the worker token", "worker", wc.Name, "expiresAt", plan.ExpiresAt)
		} else {
			metrics.CredentialRenewals.WithLabelValues(wc.Name, "failed").Inc()
			p.Recorder.Eventf(wc, nil, corev1.EventTypeWarning, ReasonCredentialRenewalFailed, "RenewCredential",
				"renewing the token failed: %v; the current one expires at %s", renewErr, plan.ExpiresAt.UTC().Format(time.RFC3339))
			logf.FromContext(ctx).Error(renewErr, "renewing the worker token", "worker", wc.Name, "expiresAt", plan.ExpiresAt)
		}
	}
	if plan.Expires {
		metrics.CredentialExpiry.WithLabelValues(wc.Name).Set(float64(plan.ExpiresAt.Unix()))
	} else {
		metrics.CredentialExpiry.DeleteLabelValues(wc.Name)
	}
	var after time.Duration
	switch {
	case !plan.Renewable || plan.Expired:
	case renewErr != nil:
		after = renewalRetry
	default:
		// A little past the renewal time, so the next reconcile finds it due.
		after = plan.RenewAt.Sub(now) + 100*time.Millisecond
	}
	return credentialStatus(claims, plan), credentialCondition(plan, renewErr), after
}

// renewToken asks the worker for a new token of the ServiceAccount the
// current one belongs to, with the same lifetime and audiences, writes it
// into the kubeconfig Secret and swaps it into the live connection. The
// Secret is written first: it is what a restarted manager reads, and until
// it holds the new token the old one stays in use.
func (p *Pool) renewToken(ctx context.Context, wc *v1alpha1.WorkerCluster, conn *Connection, plan renewalPlan, audiences []string) (*tokenClaims, error) {
	if !conn.healthy.Load() {
		return nil, errors.New("the worker does not answer")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	old := conn.token.get()
	seconds := int64(max(plan.Lifetime, minTokenLifetime) / time.Second)
	request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To(seconds)}}
	issued, err := conn.health.CoreV1().ServiceAccounts(plan.Namespace).CreateToken(ctx, plan.ServiceAccount, request, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("TokenRequest for ServiceAccount %s/%s on the worker: %w", plan.Namespace, plan.ServiceAccount, err)
	}
	fresh := parseToken(issued.Status.Token)
	if fresh == nil || fresh.Expiry == 0 {
		return nil, fmt.Errorf("the worker issued a token for ServiceAccount %s/%s that is not a JWT with an expiry", plan.Namespace, plan.ServiceAccount)
	}

	ref := wc.Spec.KubeConfig.SecretRef
	key := ref.KeyOrDefault()
	secret := &corev1.Secret{}
	if err := p.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: ref.Name}, secret); err != nil {
		return nil, fmt.Errorf("reading Secret %s/%s to renew its token: %w", p.Namespace, ref.Name, err)
	}
	if current, err := kubeconfigToken(secret.Data[key]); err != nil || current != old {
		// Someone wrote the Secret since the connection read it; the next
		// reconcile takes their token and plans again.
		return nil, fmt.Errorf("Secret %s/%s changed while its token was being renewed; trying again", p.Namespace, ref.Name)
	}
	data, err := withToken(secret.Data[key], issued.Status.Token)
	if err != nil {
		return nil, fmt.Errorf("putting the renewed token into Secret %s/%s: %w", p.Namespace, ref.Name, err)
	}
	secret.Data[key] = data
	if err := p.Client.Update(ctx, secret); err != nil {
		return nil, fmt.Errorf("writing the renewed token into Secret %s/%s: %w", p.Namespace, ref.Name, err)
	}
	conn.token.set(issued.Status.Token)
	return fresh, nil
}
