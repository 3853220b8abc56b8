package devenv

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/wait"
)

// IsLeader reads controller-runtime's leader_election_master_status from a
// replica's metrics; false when the replica does not answer.
func IsLeader(ctx context.Context, metricsURL string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return false
	}
	for _, m := range families["leader_election_master_status"].GetMetric() {
		if m.GetGauge().GetValue() == 1 {
			return true
		}
	}
	return false
}

// waitLeading returns once the replica serving metricsURL leads (within
// the warm-up a candidate may wait for its workers, 2m by default). Start
// waits for the first replica to lead before it starts the next, so the
// first (ManagerProcess) is the leader a test or the bench starts with:
// which of two replicas that stand at once wins the lease is a race.
func waitLeading(ctx context.Context, metricsURL string, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		return IsLeader(ctx, metricsURL), nil
	})
	if err != nil {
		return fmt.Errorf("the first manager replica did not lead within %s: %w", timeout, err)
	}
	return nil
}
