package localcluster

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
)

func TestInotifyInstancesOfAnEnvironment(t *testing.T) {
	simulated := EnvironmentSpec{Manager: Spec{Name: "manager"}}
	for i := 0; i < 50; i++ {
		simulated.Workers = append(simulated.Workers, Spec{APIServerOnly: true})
	}
	real := EnvironmentSpec{Manager: Spec{Name: "manager"}, Workers: []Spec{{Pools: []Pool{{Name: "general"}}}, {Pools: []Pool{{Name: "general"}}}}}
	for _, tc := range []struct {
		name  string
		spec  EnvironmentSpec
		limit int
		want  int
		fits  bool
		// raise is the limit the refusal suggests.
		raise int
	}{
		{"two real workers fit the default limit", real, 128, 16 + 6 + 2 + 2*(6+2+4), true, 0},
		{"fifty simulated workers do not", simulated, 128, 16 + 6 + 2 + 50*6, false, 512},
		{"they do once it is raised", simulated, 1024, 16 + 6 + 2 + 50*6, true, 0},
		{"200 followed logs on two real workers do not", withFollowedLogs(real, 200), 128, 16 + 6 + 2 + 2*(6+2+4) + 200, false, 256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			need := inotifyInstances(tc.spec)
			if need != tc.want {
				t.Fatalf("need %d inotify instances, want %d", need, tc.want)
			}
			err := inotifyVerdict(need, 0, tc.limit, len(tc.spec.Workers)+1)
			if (err == nil) != tc.fits {
				t.Fatalf("verdict %v, want fits=%v", err, tc.fits)
			}
			if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("sysctl -w fs.inotify.max_user_instances=%d", tc.raise)) {
				t.Fatalf("the error does not say how to raise the limit: %v", err)
			}
		})
	}
}

func TestInotifyInUseCountsThisProcesssInstances(t *testing.T) {
	before := inotifyInUse()
	fd, err := syscall.InotifyInit()
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	// Other processes of this user may open or close theirs meanwhile:
	// the count grows by at least this one unless one closed.
	if after := inotifyInUse(); after < 1 {
		t.Fatalf("%d inotify instances in use with one open (%d before)", after, before)
	}
	if err := inotifyVerdict(100, 200, 256, 3); err == nil || !strings.Contains(err.Error(), "200 are in use") || !strings.Contains(err.Error(), "max_user_instances=512") {
		t.Fatalf("instances in use left out of the verdict: %v", err)
	}
}

func withFollowedLogs(spec EnvironmentSpec, n int) EnvironmentSpec {
	spec.FollowedLogs = n
	return spec
}

func TestEtcdOfNamesAClusterRunningItsOwnEtcd(t *testing.T) {
	for _, tc := range []struct {
		name  string
		specs []Spec
		err   string
	}{
		{"own etcds", []Spec{{Name: "manager"}, {Name: "worker-1"}}, ""},
		{"sharing the first worker's", []Spec{{Name: "manager"}, {Name: "worker-1"}, {Name: "worker-2", EtcdOf: "worker-1"}}, ""},
		{"an unknown cluster", []Spec{{Name: "manager"}, {Name: "worker-2", EtcdOf: "worker-1"}}, `cluster worker-2: EtcdOf "worker-1" names no cluster`},
		{"one that shares itself", []Spec{{Name: "manager"}, {Name: "worker-1", EtcdOf: "manager"}, {Name: "worker-2", EtcdOf: "worker-1"}}, `cluster worker-2: EtcdOf "worker-1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkEtcdOf(tc.specs)
			if tc.err == "" && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}
