package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// WebhookCerts says where the webhook server's (and the secure metrics
// endpoint's) certificate comes from: the Secret Namespace/Secret, written by
// the manager itself when Rotate (open-policy-agent/cert-controller, which
// also puts its CA into the webhook configurations) or by cert-manager
// otherwise. Either way the manager serves the Secret's certificate from
// memory as soon as the Secret changes — not after the kubelet refreshes a
// mounted volume, the cause of webhook errors for tens of seconds after Ready
// elsewhere (kueue #13036) — and copies it into Dir, where the rotator
// checks for it.
type WebhookCerts struct {
	Namespace, Secret string
	Dir               string
	Rotate            bool
	// DNSNames the certificate is for: the webhook Service's name first.
	DNSNames []string
	// MutatingWebhook and ValidatingWebhook are the configurations whose
	// caBundle the rotator keeps in step; APIService, when set, the
	// APIService of the inspection API the same certificate serves.
	MutatingWebhook, ValidatingWebhook string
	APIService                         string
}

// CertSource serves the current certificate of a WebhookCerts to TLS
// servers: none (every handshake fails) until the Secret holds one.
type CertSource struct {
	current atomic.Pointer[tls.Certificate]
}

// TLSConfig is a TLS option (webhook.Options.TLSOpts,
// metricsserver.Options.TLSOpts) serving the current certificate.
func (c *CertSource) TLSConfig(cfg *tls.Config) {
	cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		if cert := c.current.Load(); cert != nil {
			return cert, nil
		}
		return nil, errors.New("no serving certificate yet")
	}
}

// SetupWebhookCerts wires the certificate into mgr, serves it through source,
// and closes ready once it is served and, when the manager rotates, its CA
// is in the webhook configurations: readiness waits for that.
func SetupWebhookCerts(mgr ctrl.Manager, certs WebhookCerts, source *CertSource, ready chan<- struct{}) error {
	written := make(chan struct{})
	if err := mgr.Add(&certFiles{certs: certs, mgr: mgr, source: source, written: written}); err != nil {
		return err
	}
	if !certs.Rotate {
		go func() {
			<-written
			close(ready)
		}()
		return nil
	}
	if len(certs.DNSNames) == 0 {
		return fmt.Errorf("rotating webhook certificates needs the webhook Service's DNS name")
	}
	rotated := make(chan struct{})
	webhooks := []rotator.WebhookInfo{
		{Name: certs.MutatingWebhook, Type: rotator.Mutating},
		{Name: certs.ValidatingWebhook, Type: rotator.Validating},
	}
	if certs.APIService != "" {
		webhooks = append(webhooks, rotator.WebhookInfo{Name: certs.APIService, Type: rotator.APIService})
	}
	if err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: certs.Namespace, Name: certs.Secret},
		CertDir:        certs.Dir,
		CAName:         "jobferry-webhook-ca",
		CAOrganization: "jobferry",
		DNSName:        certs.DNSNames[0],
		ExtraDNSNames:  certs.DNSNames[1:],
		IsReady:        rotated,
		Webhooks:       webhooks,
		// Every replica serves the webhooks, so every replica keeps the
		// Secret valid; they agree through the Secret itself.
		RequireLeaderElection: false,
	}); err != nil {
		return fmt.Errorf("adding the webhook certificate rotator: %w", err)
	}
	go func() {
		<-rotated
		<-written
		close(ready)
	}()
	return nil
}

// certFiles copies the certificate Secret into the certificate directory
// whenever it changes. It runs on every replica.
type certFiles struct {
	certs   WebhookCerts
	mgr     ctrl.Manager
	source  *CertSource
	written chan struct{}
	once    bool
}

func (c *certFiles) NeedLeaderElection() bool { return false }

func (c *certFiles) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("webhook-certs")
	informer, err := c.mgr.GetCache().GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return fmt.Errorf("watching the certificate Secret: %w", err)
	}
	updates := make(chan *corev1.Secret, 8)
	onSecret := func(obj any) {
		if s, ok := obj.(*corev1.Secret); ok && s.Namespace == c.certs.Namespace && s.Name == c.certs.Secret {
			updates <- s
		}
	}
	registration, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: onSecret, UpdateFunc: func(_, obj any) { onSecret(obj) },
	})
	if err != nil {
		return err
	}
	defer func() {
		// Stopping: the informer ends with the manager anyway.
		if err := informer.RemoveEventHandler(registration); err != nil {
			log.Error(err, "removing the Secret handler")
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case s := <-updates:
			present, changed, err := writeCertFiles(c.certs.Dir, s)
			if err != nil {
				// The webhook server keeps the files it has; the next
				// change of the Secret tries again.
				log.Error(err, "writing the webhook certificate", "secret", c.certs.Secret)
				continue
			}
			if !present {
				continue
			}
			cert, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
			if err != nil {
				log.Error(err, "the certificate Secret holds no valid key pair", "secret", c.certs.Secret)
				continue
			}
			c.source.current.Store(&cert)
			if changed {
				log.Info("webhook certificate written", "secret", c.certs.Secret, "dir", c.certs.Dir)
			}
			if !c.once {
				c.once = true
				close(c.written)
			}
		}
	}
}

// writeCertFiles writes the Secret's certificate files into dir, each by
// rename so the server never reads half a file, once the Secret holds a
// certificate and key. It reports whether the files are there (present) and
// whether one changed.
func writeCertFiles(dir string, s *corev1.Secret) (present, changed bool, err error) {
	if len(s.Data[corev1.TLSCertKey]) == 0 || len(s.Data[corev1.TLSPrivateKeyKey]) == 0 {
		return false, false, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, false, err
	}
	// The key first: the certificate watcher reloads on the certificate.
	for _, key := range []string{corev1.TLSPrivateKeyKey, "ca.crt", corev1.TLSCertKey} {
		data, ok := s.Data[key]
		if !ok {
			continue
		}
		path := filepath.Join(dir, key)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
			continue
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			return false, changed, err
		}
		if err := os.Rename(tmp, path); err != nil {
			return false, changed, err
		}
		changed = true
	}
	return true, changed, nil
}
