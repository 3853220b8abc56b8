package jobindex

import "testing"

func TestIntervalsRoundTrip(t *testing.T) {
	cases := map[string]struct {
		in          string
		completions int
		want        string
		total       int
	}{
		"empty":                      {in: "", completions: 5, want: "", total: 0},
		"single":                     {in: "3", completions: 5, want: "3", total: 1},
		"two consecutive as a pair":  {in: "1,2", completions: 5, want: "1,2", total: 2},
		"three as a range":           {in: "1,2,3", completions: 5, want: "1-3", total: 3},
		"adjacent ranges merge":      {in: "0-2,3-4", completions: 10, want: "0-4", total: 5},
		"beyond completions dropped": {in: "1,4-9", completions: 6, want: "1,4,5", total: 3},
		"malformed entries skipped":  {in: "1,x,3", completions: 5, want: "1,3", total: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Parse(tc.in, tc.completions)
			if got.String() != tc.want || got.Total() != tc.total {
				t.Errorf("Parse(%q) = %q (total %d), want %q (total %d)", tc.in, got.String(), got.Total(), tc.want, tc.total)
			}
		})
	}
}

func TestIntervalsWithIndexesAndHas(t *testing.T) {
	iv := Parse("0,5-7", 20).WithIndexes([]int{1, 3, 8, 19})
	if got, want := iv.String(), "0,1,3,5-8,19"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	for ix, want := range map[int]bool{0: true, 2: false, 3: true, 6: true, 9: false, 19: true, 20: false} {
		if iv.Has(ix) != want {
			t.Errorf("has(%d) = %t, want %t", ix, !want, want)
		}
	}
}
