package workers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
// Each number has at most four digits and the whole at most
// maxGitVersion characters (what the WorkerCluster's status takes).
var gitVersionPattern = regexp.MustCompile(`^v[0-9]{1,4}\.[0-9]{1,4}\.[0-9]{1,4}([-+.][0-9A-Za-z.+-]{0,48})?$`)

// maxGitVersion is the longest gitVersion kept: the CRD's bound of
// status.kubernetesVersion.
const maxGitVersion = 64

// readVersion reads the worker's /version. The worker's API server answers
// it, nobody who writes objects there; still no more than maxVersionBytes
// of its answer is read, and it must look like a Kubernetes version.
func readVersion(ctx context.Context, c rest.Interface) (*KubernetesVersion, error) {
	body, err := c.Get().AbsPath("/version").Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading /version: %w", err)
	}
	defer body.Close()
	raw, err := io.ReadAll(io.LimitReader(body, maxVersionBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading /version: %w", err)
	}
	return parseVersion(raw)
}

func parseVersion(raw []byte) (*KubernetesVersion, error) {
	if len(raw) > maxVersionBytes {
		return nil, fmt.Errorf("/version answered more than the %d bytes a version takes", maxVersionBytes)
	}
	var info struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		return nil, fmt.Errorf("/version: %w", err)
	}
	if len(info.GitVersion) > maxGitVersion || !gitVersionPattern.MatchString(info.GitVersion) {
		return nil, fmt.Errorf("/version: gitVersion %.80q is not a Kubernetes version", info.GitVersion)
	}
	parsed, err := version.ParseGeneric(info.GitVersion)
	if err != nil {
		return nil, fmt.Errorf("/version: gitVersion %q: %w", info.GitVersion, err)
	}
	return &KubernetesVersion{GitVersion: info.GitVersion, Parsed: parsed}, nil
}
