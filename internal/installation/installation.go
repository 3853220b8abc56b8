// Package installation identifies a jobferry manager installation: the ID
// its mirrors carry on the workers (v1alpha1.ManagerIDLabel), which the
// worker chart's admission policy can be pinned to. The manager and
// `kubectl jobferry join` compute it alike.
package installation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ID identifies the manager installation of namespace on the workers
// (v1alpha1.ManagerIDLabel on its mirrors): its cluster, by the UID of its
// kube-system namespace (which lives as long as the cluster), and the
// namespace it runs in, hashed to a label value. Two managers given the same
// origin by mistake thus tell their mirrors apart. It reads kube-system
// with the namespaces list right the manager has.
func ID(ctx context.Context, reader client.Reader, namespace string) (string, error) {
	var list corev1.NamespaceList
	if err := reader.List(ctx, &list, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", metav1.NamespaceSystem)}); err != nil {
		return "", fmt.Errorf("reading namespace %s, whose UID identifies this cluster: %w", metav1.NamespaceSystem, err)
	}
	if len(list.Items) != 1 {
		return "", fmt.Errorf("namespace %s, whose UID identifies this cluster, was not found", metav1.NamespaceSystem)
	}
	return hashID(string(list.Items[0].UID), namespace), nil
}

// hashID hashes a cluster UID and namespace into a label value.
func hashID(clusterUID, namespace string) string {
	sum := sha256.Sum256([]byte(clusterUID + "/" + namespace))
	return hex.EncodeToString(sum[:8])
}
