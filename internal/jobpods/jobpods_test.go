package jobpods

import "testing"

func TestGenerateNameWithIndex(t *testing.T) {
	long := "a-very-long-job-name-that-goes-on-and-on-and-on-and-on-and-on"
	got := GenerateNameWithIndex(long, 12)
	if len(got) != 58 || got[len(got)-4:] != "-12-" {
		t.Errorf("GenerateNameWithIndex(long, 12) = %q (%d chars), want 58 chars ending in -12-", got, len(got))
	}
	if got := GenerateNameWithIndex("job", 3); got != "job-3-" {
		t.Errorf("got %q, want job-3-", got)
	}
}
