package workers

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/rest"
)

// KubernetesVersion is a worker's Kubernetes version: as its API server
// reports it (GitVersion, shown on the WorkerCluster) and parsed (Parsed,
// what placement compares).
type KubernetesVersion struct {
	GitVersion string
	Parsed     *version.Version
}

// maxVersionBytes bounds what is read of a worker's /version: the API
// server's answer is a few hundred bytes.
const maxVersionBytes = 4 << 10

// gitVersionPattern is what a gitVersion may look like to be kept and
// shown: a release's (v1.36.3), a provider's (v1.33.5-eks-3025e55,
// v1.32.9-gke.1072000) or a build's (v1.37.0-alpha.1.120+0123456789abcd).
var gitVersionPattern = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+([-+.][0-9A-Za-z.+-]{0,48})?$`)

// readVersion reads the worker's /version. The worker's API server answers
// it, nobody who writes objects there; still its answer is bounded and must
// look like a Kubernetes version, or the probe fails saying so.
func readVersion(ctx context.Context, c rest.Interface) (*KubernetesVersion, error) {
	raw, err := c.Get().AbsPath("/version").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading /version: %w", err)
	}
	return parseVersion(raw)
}

func parseVersion(raw []byte) (*KubernetesVersion, error) {
	if len(raw) > maxVersionBytes {
		return nil, fmt.Errorf("/version answered %d bytes, more than the %d a version takes", len(raw), maxVersionBytes)
	}
	var info struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		return nil, fmt.Errorf("/version: %w", err)
	}
	if !gitVersionPattern.MatchString(info.GitVersion) {
		return nil, fmt.Errorf("/version: gitVersion %.80q is not a Kubernetes version", info.GitVersion)
	}
	parsed, err := version.ParseGeneric(info.GitVersion)
	if err != nil {
		return nil, fmt.Errorf("/version: gitVersion %q: %w", info.GitVersion, err)
	}
	return &KubernetesVersion{GitVersion: info.GitVersion, Parsed: parsed}, nil
}
