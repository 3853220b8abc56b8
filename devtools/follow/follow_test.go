package follow

import "testing"

func TestPodsStreamedCountsPodsByTheirPrefix(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  string
		pods int
	}{
		{"nothing yet", "", 0},
		{"a limit said, no pod", "jobferry: following 64 of 80 log streams open at once\n", 0},
		{"two lines of one pod", "[pod/a-1/main] started\n[pod/a-1/main] done\n", 1},
		{"two pods, one with two containers", "[pod/a-1/main] x\n[pod/a-2/main] x\n[pod/a-2/side] x\n", 2},
		{"a line cut before its container", "[pod/a-3", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodsStreamed(tc.log); got != tc.pods {
				t.Fatalf("PodsStreamed = %d, want %d", got, tc.pods)
			}
		})
	}
}
