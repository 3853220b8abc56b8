package devenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/jobferry/jobferry/devtools/localcluster"
)

// MultiKueueCheck names MultiKueue's AdmissionCheck on the manager cluster
// and the MultiKueueConfig it takes as parameters.
const MultiKueueCheck = "multikueue"

// StartWorkerKueue runs Kueue (bin/kueue, with its CRDs) on every worker
// with nodes, on the worker's CPUs, as MultiKueue's workers run it.
func (e *Env) StartWorkerKueue(ctx context.Context, opts localcluster.KueueOptions, progress io.Writer) error {
	binDir, err := localcluster.BinDir()
	if err != nil {
		return err
	}
	opts.BinDir = binDir
	for _, w := range e.Workers {
		if w.APIServerOnly {
			continue
		}
		fmt.Fprintf(progress, "%s: starting Kueue\n", w.Name)
		if _, err := w.StartKueue(ctx, opts); err != nil {
			return fmt.Errorf("%s: starting Kueue: %w", w.Name, err)
		}
	}
	return nil
}

// SetUpMultiKueue makes on the manager cluster what Kueue's MultiKueue
// guide has an administrator make (Kueue v0.17, "Setup a MultiKueue
// environment"): for each worker a Secret in Kueue's namespace holding its
// kubeconfig under the key "kubeconfig" and a MultiKueueCluster naming it;
// one MultiKueueConfig MultiKueueCheck listing them; and the AdmissionCheck
// MultiKueueCheck of controller kueue.x-k8s.io/multikueue with that config
// as parameters. It waits until every MultiKueueCluster and the check are
// Active: Kueue has connected to every worker.
//
// The workers' kubeconfigs are the environment's administrator's (their
// certificates embedded, as MultiKueue requires): the bench measures
// MultiKueue's work, not its least privilege.
func SetUpMultiKueue(ctx context.Context, c client.Client, workers []*localcluster.Cluster, timeout time.Duration) error {
	var names []string
	for _, w := range workers {
		kubeconfig, err := os.ReadFile(w.KubeconfigPath)
		if err != nil {
			return fmt.Errorf("reading %s's kubeconfig: %w", w.Name, err)
		}
		secret := "multikueue-" + w.Name
		if err := CreateUnlessExists(ctx, c,
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: localcluster.KueueNamespace, Name: secret}, Data: map[string][]byte{kueue.MultiKueueConfigSecretKey: kubeconfig}},
			&kueue.MultiKueueCluster{ObjectMeta: metav1.ObjectMeta{Name: w.Name}, Spec: kueue.MultiKueueClusterSpec{ClusterSource: kueue.ClusterSource{
				KubeConfig: &kueue.KubeConfig{LocationType: kueue.SecretLocationType, Location: secret}}}},
		); err != nil {
			return err
		}
		names = append(names, w.Name)
	}
	if err := CreateUnlessExists(ctx, c,
		&kueue.MultiKueueConfig{ObjectMeta: metav1.ObjectMeta{Name: MultiKueueCheck}, Spec: kueue.MultiKueueConfigSpec{Clusters: names}},
		&kueue.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: MultiKueueCheck}, Spec: kueue.AdmissionCheckSpec{
			ControllerName: kueue.MultiKueueControllerName,
			Parameters:     &kueue.AdmissionCheckParametersReference{APIGroup: kueue.GroupVersion.Group, Kind: "MultiKueueConfig", Name: MultiKueueCheck},
		}},
	); err != nil {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			var mc kueue.MultiKueueCluster
			if err := c.Get(ctx, client.ObjectKey{Name: name}, &mc); err != nil {
				return false, err
			}
			if !meta.IsStatusConditionTrue(mc.Status.Conditions, kueue.MultiKueueClusterActive) {
				return false, nil
			}
		}
		var ac kueue.AdmissionCheck
		if err := c.Get(ctx, client.ObjectKey{Name: MultiKueueCheck}, &ac); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(ac.Status.Conditions, kueue.AdmissionCheckActive), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for Kueue to connect to the workers (MultiKueueClusters and the AdmissionCheck %s Active): %w", MultiKueueCheck, err)
	}
	return nil
}
