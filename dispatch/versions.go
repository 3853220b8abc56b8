package dispatch

import (
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
)

// A VersionedFeature is a part of a Job that a worker keeps and enforces
// only from some Kubernetes minor on: the minor its feature gate is on by
// default. Below it the worker's API server drops the field from the mirror
// without an error (an unknown field, or one whose gate is off), and the
// mirror runs with other semantics than the user asked for: a pod-level
// resource limit gone, pods in the host's user namespace, a success policy
// ignored. Placement sends a Job using one only to a worker on that minor or
// later.
//
// Two tests keep the table true: TestIntegrationVersionedFeaturesFollow-
// KubernetesFeatureGates reads each gate's history from the pinned
// Kubernetes (pkg/features/kube_features.go) and checks Since is the minor
// it turned on by default; e2e TestMixedKubernetesMinors
// (versioned-features-hold-on-each-minor) creates each row's sample on the
// API servers of the minors the project runs, and checks each keeps the
// field from Since on and drops it before.
type VersionedFeature struct {
	// Field is where the Job carries it, as its API documentation names it.
	Field string
	// Gate is the Kubernetes feature gate that guards it.
	Gate string
	// Since is the first minor where the gate is on by default.
	Since *version.Version
	// Uses says whether the Job sets the field.
	Uses func(*batchv1.Job) bool
}

// VersionedFeatures are the Job fields placement checks a worker's version
// for, oldest first. A Job's own spec.managedBy never reaches a mirror (the
// manager Job's names jobferry); the row for it applies to the mirrors of
// workers whose Job controller is jobferry's worker (spec.jobController
// Worker), which carry spec.managedBy jobferry.dev/worker.
var VersionedFeatures = []VersionedFeature{
	{Field: "spec.podFailurePolicy", Gate: "JobPodFailurePolicy", Since: version.MajorMinor(1, 26),
		Uses: func(j *batchv1.Job) bool { return j.Spec.PodFailurePolicy != nil }},
	{Field: "spec.podReplacementPolicy", Gate: "JobPodReplacementPolicy", Since: version.MajorMinor(1, 29),
		Uses: func(j *batchv1.Job) bool { return j.Spec.PodReplacementPolicy != nil }},
	{Field: "spec.backoffLimitPerIndex, spec.maxFailedIndexes", Gate: "JobBackoffLimitPerIndex", Since: version.MajorMinor(1, 29),
		Uses: func(j *batchv1.Job) bool { return j.Spec.BackoffLimitPerIndex != nil || j.Spec.MaxFailedIndexes != nil }},
	{Field: "spec.template.spec.initContainers[].restartPolicy", Gate: "SidecarContainers", Since: version.MajorMinor(1, 29),
		Uses: func(j *batchv1.Job) bool {
			return anyContainer(j.Spec.Template.Spec.InitContainers, func(c corev1.Container) bool { return c.RestartPolicy != nil })
		}},
	{Field: "spec.successPolicy", Gate: "JobSuccessPolicy", Since: version.MajorMinor(1, 31),
		Uses: func(j *batchv1.Job) bool { return j.Spec.SuccessPolicy != nil }},
	{Field: "spec.managedBy", Gate: "JobManagedBy", Since: version.MajorMinor(1, 32),
		Uses: func(j *batchv1.Job) bool { return j.Spec.ManagedBy != nil }},
	{Field: "spec.template.spec.hostUsers", Gate: "UserNamespacesSupport", Since: version.MajorMinor(1, 33),
		Uses: func(j *batchv1.Job) bool { return j.Spec.Template.Spec.HostUsers != nil }},
	{Field: "spec.template.spec.(init)containers[].securityContext.procMount", Gate: "ProcMountType", Since: version.MajorMinor(1, 33),
		Uses: func(j *batchv1.Job) bool {
			// An older API server writes Default over any other value.
			return anyPodContainer(j, func(c corev1.Container) bool {
				return c.SecurityContext != nil && c.SecurityContext.ProcMount != nil && *c.SecurityContext.ProcMount != corev1.DefaultProcMount
			})
		}},
	{Field: "spec.template.spec.securityContext.seLinuxChangePolicy", Gate: "SELinuxChangePolicy", Since: version.MajorMinor(1, 33),
		Uses: func(j *batchv1.Job) bool {
			sc := j.Spec.Template.Spec.SecurityContext
			return sc != nil && sc.SELinuxChangePolicy != nil
		}},
	{Field: "spec.template.spec.(init)containers[].resizePolicy", Gate: "InPlacePodVerticalScaling", Since: version.MajorMinor(1, 33),
		Uses: func(j *batchv1.Job) bool {
			return anyPodContainer(j, func(c corev1.Container) bool { return len(c.ResizePolicy) > 0 })
		}},
	{Field: "spec.template.spec.securityContext.supplementalGroupsPolicy", Gate: "SupplementalGroupsPolicy", Since: version.MajorMinor(1, 33),
		Uses: func(j *batchv1.Job) bool {
			sc := j.Spec.Template.Spec.SecurityContext
			return sc != nil && sc.SupplementalGroupsPolicy != nil
		}},
	{Field: "spec.template.spec.resources", Gate: "PodLevelResources", Since: version.MajorMinor(1, 34),
		Uses: func(j *batchv1.Job) bool { return j.Spec.Template.Spec.Resources != nil }},
	{Field: "spec.template.spec.resourceClaims, (init)containers[].resources.claims", Gate: "DynamicResourceAllocation", Since: version.MajorMinor(1, 34),
		Uses: func(j *batchv1.Job) bool {
			return len(j.Spec.Template.Spec.ResourceClaims) > 0 || anyPodContainer(j, func(c corev1.Container) bool { return len(c.Resources.Claims) > 0 })
		}},
	{Field: "spec.template.spec.containers[].restartPolicy, restartPolicyRules", Gate: "ContainerRestartRules", Since: version.MajorMinor(1, 35),
		Uses: func(j *batchv1.Job) bool {
			return anyContainer(j.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.RestartPolicy != nil || len(c.RestartPolicyRules) > 0 })
		}},
	{Field: "spec.template.spec.(init)containers[].env[].valueFrom.fileKeyRef", Gate: "EnvFiles", Since: version.MajorMinor(1, 35),
		Uses: func(j *batchv1.Job) bool {
			return anyPodContainer(j, func(c corev1.Container) bool {
				for _, e := range c.Env {
					if e.ValueFrom != nil && e.ValueFrom.FileKeyRef != nil {
						return true
					}
				}
				return false
			})
		}},
	{Field: "spec.template.spec.hostnameOverride", Gate: "HostnameOverride", Since: version.MajorMinor(1, 35),
		Uses: func(j *batchv1.Job) bool { return j.Spec.Template.Spec.HostnameOverride != nil }},
	{Field: "spec.template.spec.volumes[].image", Gate: "ImageVolume", Since: version.MajorMinor(1, 35),
		Uses: func(j *batchv1.Job) bool {
			for _, v := range j.Spec.Template.Spec.Volumes {
				if v.Image != nil {
					return true
				}
			}
			return false
		}},
}

// anyPodContainer: f holds of one of the Job's containers or init containers.
func anyPodContainer(j *batchv1.Job, f func(corev1.Container) bool) bool {
	s := &j.Spec.Template.Spec
	return anyContainer(s.Containers, f) || anyContainer(s.InitContainers, f)
}

func anyContainer(cs []corev1.Container, f func(corev1.Container) bool) bool {
	for _, c := range cs {
		if f(c) {
			return true
		}
	}
	return false
}

// managedByFeature is the row of spec.managedBy.
var managedByFeature = func() VersionedFeature {
	for _, f := range VersionedFeatures {
		if f.Gate == "JobManagedBy" {
			return f
		}
	}
	panic("VersionedFeatures has no JobManagedBy row")
}()

// UsedFeatures are the rows of VersionedFeatures the Job uses (its own
// spec.managedBy aside: see VersionedFeatures), by Field.
func UsedFeatures(job *batchv1.Job) []string {
	var out []string
	for _, f := range VersionedFeatures {
		if f.Gate != managedByFeature.Gate && f.Uses(job) {
			out = append(out, f.Field)
		}
	}
	return out
}

// mirrorsCarry says of the managedBy row why it applies to a worker.
const mirrorsCarry = "its mirrors carry (jobController: Worker)"

// versionRejects says why a worker on Kubernetes v (nil: not known yet)
// would drop a field the Job or its mirror uses, "" when it would not.
func versionRejects(job *batchv1.Job, w Worker) string {
	var missing []VersionedFeature
	for _, f := range VersionedFeatures {
		uses := f.Gate != managedByFeature.Gate && f.Uses(job) || f.Gate == managedByFeature.Gate && w.WorkerJobController
		if uses && (w.Version == nil || !w.Version.AtLeast(f.Since)) {
			missing = append(missing, f)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	if w.Version == nil {
		fields := make([]string, len(missing))
		for i, f := range missing {
			fields[i] = f.Field
			if f.Gate == managedByFeature.Gate {
				fields[i] = mirrorsCarry + " " + f.Field
			}
		}
		return fmt.Sprintf("its Kubernetes version is not known yet, and older versions drop what the Job needs: %s", strings.Join(fields, ", "))
	}
	parts := make([]string, len(missing))
	for i, f := range missing {
		what := "the Job uses"
		if f.Gate == managedByFeature.Gate {
			what = mirrorsCarry
		}
		parts[i] = fmt.Sprintf("%s %s, kept from v%d.%d (feature gate %s)", what, f.Field, f.Since.Major(), f.Since.Minor(), f.Gate)
	}
	return fmt.Sprintf("Kubernetes v%s there would drop what the Job asks for: %s", w.Version, strings.Join(parts, "; "))
}
