package devenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/jobferry/jobferry/devtools/localcluster"
)

// ChartManagerServiceAccount is the worker chart's ServiceAccount for the
// manager (managerIdentity.serviceAccountName's default), in
// SystemNamespace on the worker.
const ChartManagerServiceAccount = "jobferry-manager"

// chartIdentityKubeconfig renders the worker chart with the real bin/helm
// (the manager's identity allowed to inspect and to create namespaces),
// applies all of it but the worker binary's Deployment (Start runs the
// binary as a process) to w with bin/kubectl, and writes a kubeconfig
// holding a token of the manager's ServiceAccount from the TokenRequest
// API: the manager then reaches w as
// an installation's would, within the rights and the API Priority and
// Fairness flows the chart gives it, not as an administrator (whom API
// Priority and Fairness exempts).
func chartIdentityKubeconfig(ctx context.Context, w *localcluster.Cluster, binDir string) (string, error) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		return "", err
	}
	args := []string{"template", "jobferry-worker", filepath.Join(root, "charts", "jobferry-worker"), "--namespace", SystemNamespace,
		"--set", "managerIdentity.allowInspection=true", "--set", "managerIdentity.allowNamespaceCreation=true", "--set", "managerIdentity.allowNamespaceDeletion=true"}
	helm := exec.CommandContext(ctx, filepath.Join(binDir, "helm"), args...)
	// helm keeps its cache and config under HOME; keep them in the
	// cluster's directory.
	home := filepath.Join(w.Dir, "helm")
	helm.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stderr bytes.Buffer
	helm.Stderr = &stderr
	rendered, err := helm.Output()
	if err != nil {
		return "", fmt.Errorf("%s: rendering the worker chart: helm %s: %v: %s", w.Name, strings.Join(args, " "), err, stderr.String())
	}
	manifest, err := withoutKind(rendered, "Deployment")
	if err != nil {
		return "", fmt.Errorf("%s: the worker chart's manifest: %w", w.Name, err)
	}

	admin, err := kubernetes.NewForConfig(w.RESTConfig())
	if err != nil {
		return "", err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: SystemNamespace}}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("%s: creating namespace %s: %w", w.Name, SystemNamespace, err)
	}
	apply := exec.CommandContext(ctx, filepath.Join(binDir, "kubectl"), "--kubeconfig", w.KubeconfigPath, "apply", "--server-side", "-f", "-")
	apply.Stdin = bytes.NewReader(manifest)
	if out, err := apply.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: applying the worker chart: %v: %s", w.Name, err, out)
	}

	kubeconfig, err := TokenKubeconfig(ctx, w, SystemNamespace, ChartManagerServiceAccount, 24*time.Hour)
	if err != nil {
		return "", err
	}
	path := filepath.Join(w.Dir, "jobferry-manager-chart.kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// withoutKind is a multi-document manifest without its objects of kind.
func withoutKind(manifest []byte, kind string) ([]byte, error) {
	var kept [][]byte
	for _, doc := range bytes.Split(manifest, []byte("\n---")) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, err
		}
		if meta.Kind != kind && meta.Kind != "" {
			kept = append(kept, doc)
		}
	}
	return bytes.Join(kept, []byte("\n---")), nil
}

// TokenKubeconfig is a kubeconfig for ServiceAccount ns/sa of c: the server
// and CA of c's admin kubeconfig, a token from the TokenRequest API valid
// for lifetime.
func TokenKubeconfig(ctx context.Context, c *localcluster.Cluster, ns, sa string, lifetime time.Duration) ([]byte, error) {
	admin, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return nil, err
	}
	token, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(lifetime / time.Second))},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("a token for %s/%s on %s: %w", ns, sa, c.Name, err)
	}
	adminConfig, err := clientcmd.LoadFromFile(c.KubeconfigPath)
	if err != nil {
		return nil, err
	}
	current := adminConfig.Contexts[adminConfig.CurrentContext]
	if current == nil || adminConfig.Clusters[current.Cluster] == nil {
		return nil, fmt.Errorf("%s: the admin kubeconfig %s names no current cluster", c.Name, c.KubeconfigPath)
	}
	cluster := adminConfig.Clusters[current.Cluster]
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[c.Name] = &clientcmdapi.Cluster{Server: cluster.Server, CertificateAuthorityData: cluster.CertificateAuthorityData}
	cfg.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: token.Status.Token}
	cfg.Contexts[sa] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: sa}
	cfg.CurrentContext = sa
	return clientcmd.Write(*cfg)
}
