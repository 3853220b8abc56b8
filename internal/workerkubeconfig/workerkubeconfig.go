// Package workerkubeconfig reads the kubeconfig of a worker from its Secret,
// accepting only self-contained ones. The manager connects with it, and
// kubectl jobferry reaches a worker with it on a user's machine: neither may
// run a program or read a file a Secret names.
package workerkubeconfig

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// Error says why a worker kubeconfig is refused; Reason becomes the
// reason of the WorkerCluster's Connected condition.
type Error struct {
	Reason  string
	Message string
}

func (e *Error) Error() string { return e.Message }

// RESTConfig accepts only self-contained kubeconfigs: inline CA
// and credentials, TLS verified, no exec plugins or auth providers (which would
// run code or read files inside the manager).
func RESTConfig(data []byte) (*rest.Config, error) {
	refuse := func(reason, format string, args ...any) (*rest.Config, error) {
		return nil, &Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return refuse(v1alpha1.ReasonInvalidKubeConfig, "cannot parse the kubeconfig: %v", err)
	}
	ctxName := cfg.CurrentContext
	kctx, ok := cfg.Contexts[ctxName]
	if !ok {
		return refuse(v1alpha1.ReasonInvalidKubeConfig, "the kubeconfig has no current context (current-context %q)", ctxName)
	}
	cluster, ok := cfg.Clusters[kctx.Cluster]
	if !ok || cluster.Server == "" {
		return refuse(v1alpha1.ReasonInvalidKubeConfig, "context %q names no cluster with a server", ctxName)
	}
	user := cfg.AuthInfos[kctx.AuthInfo]
	switch {
	case strings.HasPrefix(strings.ToLower(cluster.Server), "http://"):
		// client-go takes an address without a scheme for https.
		return refuse(v1alpha1.ReasonInsecureKubeConfig, "cluster %q is served over plain http (%s): the credential would travel in clear; use the worker's https:// address", kctx.Cluster, cluster.Server)
	case cluster.ProxyURL != "":
		return refuse(v1alpha1.ReasonInsecureKubeConfig, "cluster %q is reached through the proxy %s, which would see the worker's traffic or choose where it goes; reach the worker directly", kctx.Cluster, cluster.ProxyURL)
	case cluster.InsecureSkipTLSVerify:
		return refuse(v1alpha1.ReasonInsecureKubeConfig, "cluster %q sets insecure-skip-tls-verify; embed its CA in certificate-authority-data instead", kctx.Cluster)
	case cluster.CertificateAuthority != "":
		return refuse(v1alpha1.ReasonFilePathNotAllowed, "cluster %q reads its CA from the file %q; embed it in certificate-authority-data instead", kctx.Cluster, cluster.CertificateAuthority)
	case user == nil:
		return refuse(v1alpha1.ReasonInvalidKubeConfig, "context %q names no user", ctxName)
	case user.Exec != nil:
		return refuse(v1alpha1.ReasonExecPluginNotAllowed, "user %q runs the exec plugin %q; use a client certificate or token embedded in the kubeconfig", kctx.AuthInfo, user.Exec.Command)
	case user.AuthProvider != nil:
		return refuse(v1alpha1.ReasonExecPluginNotAllowed, "user %q uses the auth provider %q; use a client certificate or token embedded in the kubeconfig", kctx.AuthInfo, user.AuthProvider.Name)
	case user.ClientCertificate != "" || user.ClientKey != "" || user.TokenFile != "":
		return refuse(v1alpha1.ReasonFilePathNotAllowed, "user %q reads credentials from files; embed client-certificate-data/client-key-data or a token instead", kctx.AuthInfo)
	}
	restConfig, err := clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return refuse(v1alpha1.ReasonInvalidKubeConfig, "invalid kubeconfig: %v", err)
	}
	return restConfig, nil
}

// Reason is the Connected condition reason for err.
func Reason(err error) string {
	var kerr *Error
	if errors.As(err, &kerr) {
		return kerr.Reason
	}
	return v1alpha1.ReasonInvalidKubeConfig
}

// FromSecret reads the kubeconfig of worker wc from the Secret its
// WorkerCluster names, in namespace: its bytes, or why there are none, as
// the reason and message of the WorkerCluster's Connected condition
// (SecretNotFound, SecretUnreadable, KubeConfigKeyMissing). The manager's
// pool and its inspection API read a worker's Secret this one way.
func FromSecret(ctx context.Context, reader client.Reader, namespace string, wc *v1alpha1.WorkerCluster) ([]byte, *Error) {
	ref := wc.Spec.KubeConfig.SecretRef
	key := ref.KeyOrDefault()
	secret := &corev1.Secret{}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &Error{Reason: v1alpha1.ReasonSecretNotFound, Message: fmt.Sprintf("Secret %s/%s not found", namespace, ref.Name)}
		}
		return nil, &Error{Reason: v1alpha1.ReasonSecretUnreadable, Message: fmt.Sprintf("reading Secret %s/%s: %v", namespace, ref.Name, err)}
	}
	data, ok := secret.Data[key]
	if !ok {
		return nil, &Error{Reason: v1alpha1.ReasonKubeConfigKeyMissing, Message: fmt.Sprintf("Secret %s/%s has no key %q", namespace, ref.Name, key)}
	}
	return data, nil
}
