// Package dispatchtest holds what tests of placement share: a Job setting
// each of dispatch.VersionedFeatures, valid for the API server.
package dispatchtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// FeatureSamples set, by the gate of each dispatch.VersionedFeatures row,
// its field on a Job (one with a container and restartPolicy Never), as a
// user would: valid for an API server that knows the field. A sample may set
// the field of another row of the same or an earlier minor that it needs to
// be valid, never one of a later minor.
var FeatureSamples = map[string]func(*batchv1.Job){
	"JobPodFailurePolicy": func(j *batchv1.Job) {
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			Action:      batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}},
		}}}
	},
	"JobPodReplacementPolicy": func(j *batchv1.Job) { j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed) },
	"JobBackoffLimitPerIndex": func(j *batchv1.Job) {
		j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		j.Spec.Completions = ptr.To[int32](2)
		j.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
	},
	"SidecarContainers": func(j *batchv1.Job) {
		j.Spec.Template.Spec.InitContainers = append(j.Spec.Template.Spec.InitContainers, corev1.Container{
			Name: "sidecar", Image: "busybox", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)})
	},
	"JobSuccessPolicy": func(j *batchv1.Job) {
		j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		j.Spec.Completions = ptr.To[int32](2)
		j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededCount: ptr.To[int32](1)}}}
	},
	"JobManagedBy":          func(j *batchv1.Job) { j.Spec.ManagedBy = ptr.To("example.com/other") },
	"UserNamespacesSupport": func(j *batchv1.Job) { j.Spec.Template.Spec.HostUsers = ptr.To(false) },
	"InPlacePodVerticalScaling": func(j *batchv1.Job) {
		c := &j.Spec.Template.Spec.Containers[0]
		c.ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired}}
	},
	"SupplementalGroupsPolicy": func(j *batchv1.Job) {
		if j.Spec.Template.Spec.SecurityContext == nil {
			j.Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{}
		}
		j.Spec.Template.Spec.SecurityContext.SupplementalGroupsPolicy = ptr.To(corev1.SupplementalGroupsPolicyStrict)
	},
	"PodLevelResources": func(j *batchv1.Job) {
		j.Spec.Template.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}
	},
	"ProcMountType": func(j *batchv1.Job) {
		c := &j.Spec.Template.Spec.Containers[0]
		if c.SecurityContext == nil {
			c.SecurityContext = &corev1.SecurityContext{}
		}
		c.SecurityContext.ProcMount = ptr.To(corev1.UnmaskedProcMount)
		// Valid only in a user namespace of its own.
		j.Spec.Template.Spec.HostUsers = ptr.To(false)
	},
	"SELinuxChangePolicy": func(j *batchv1.Job) {
		if j.Spec.Template.Spec.SecurityContext == nil {
			j.Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{}
		}
		j.Spec.Template.Spec.SecurityContext.SELinuxChangePolicy = ptr.To(corev1.SELinuxChangePolicyRecursive)
	},
	"ContainerRestartRules": func(j *batchv1.Job) {
		c := &j.Spec.Template.Spec.Containers[0]
		c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
		c.RestartPolicyRules = []corev1.ContainerRestartRule{{
			Action:    corev1.ContainerRestartRuleActionRestart,
			ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
		}}
	},
	"EnvFiles": func(j *batchv1.Job) {
		s := &j.Spec.Template.Spec
		s.Volumes = append(s.Volumes, corev1.Volume{Name: "env-file", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		s.Containers[0].Env = append(s.Containers[0].Env, corev1.EnvVar{Name: "FROM_FILE", ValueFrom: &corev1.EnvVarSource{
			FileKeyRef: &corev1.FileKeySelector{VolumeName: "env-file", Path: "vars.env", Key: "FROM_FILE"}}})
	},
	"HostnameOverride": func(j *batchv1.Job) { j.Spec.Template.Spec.HostnameOverride = ptr.To("override") },
	"ImageVolume": func(j *batchv1.Job) {
		s := &j.Spec.Template.Spec
		s.Volumes = append(s.Volumes, corev1.Volume{Name: "image", VolumeSource: corev1.VolumeSource{
			Image: &corev1.ImageVolumeSource{Reference: "busybox:1.35", PullPolicy: corev1.PullIfNotPresent}}})
	},
	"DynamicResourceAllocation": func(j *batchv1.Job) {
		j.Spec.Template.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}
		j.Spec.Template.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	},
}

// OldestClaimedMinor is the oldest Kubernetes minor the charts claim (their
// kubeVersion, ">= 1.N.0-0"), read from the repository at root; both charts
// must claim the same.
func OldestClaimedMinor(root string) (*version.Version, error) {
	var claimed *version.Version
	for _, chart := range []string{"jobferry-manager", "jobferry-worker"} {
		path := filepath.Join(root, "charts", chart, "Chart.yaml")
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var meta struct {
			KubeVersion string `json:"kubeVersion"`
		}
		if err := yaml.Unmarshal(raw, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		floor, ok := strings.CutPrefix(meta.KubeVersion, ">= ")
		if !ok {
			return nil, fmt.Errorf("%s: kubeVersion %q is not \">= 1.N.0-0\"", path, meta.KubeVersion)
		}
		v, err := version.ParseSemantic(floor)
		if err != nil {
			return nil, fmt.Errorf("%s: kubeVersion %q: %w", path, meta.KubeVersion, err)
		}
		v = version.MajorMinor(v.Major(), v.Minor())
		if claimed != nil && !claimed.EqualTo(v) {
			return nil, fmt.Errorf("the charts claim different minors: v%s and v%s (%s)", claimed, v, path)
		}
		claimed = v
	}
	return claimed, nil
}
