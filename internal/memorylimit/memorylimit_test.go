package memorylimit

import (
	"strings"
	"testing"
)

func TestDecide(t *testing.T) {
	cases := []struct {
		name, goMemLimit, limit string
		ratio                   float64
		want                    int64
		wantErr                 string
	}{
		{name: "the container's limit", limit: "1073741824", ratio: 0.9, want: 966367641},
		{name: "all of it", limit: "1000", ratio: 1, want: 1000},
		{name: "GOMEMLIMIT wins", goMemLimit: "700MiB", limit: "1073741824", ratio: 0.9},
		{name: "no limit known", ratio: 0.9},
		{name: "not bytes", limit: "1Gi", ratio: 0.9, wantErr: `JOBFERRY_MEMORY_LIMIT="1Gi" is not a memory limit in bytes`},
		{name: "zero", limit: "0", ratio: 0.9, wantErr: "is not a memory limit in bytes"},
		{name: "a ratio above one", limit: "1000", ratio: 1.5, wantErr: "must be in (0, 1]"},
		{name: "a ratio of zero", limit: "1000", ratio: 0, wantErr: "must be in (0, 1]"},
		{name: "a bad ratio without a limit", ratio: -1, wantErr: "must be in (0, 1]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, why, err := Decide(tc.goMemLimit, tc.limit, tc.ratio)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Decide = %d, %v; want an error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want || why == "" {
				t.Errorf("Decide = %d, %q, %v; want %d with a reason", got, why, err, tc.want)
			}
		})
	}
}
