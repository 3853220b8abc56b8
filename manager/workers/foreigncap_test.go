package workers

import (
	"fmt"
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	v1alpha1 "github.com/jobferry/jobferry/api/v1alpha1"
)

// The cap on foreign Jobs, event by event: this manager's Jobs always
// pass; foreign ones (another installation's ID, or none) pass while their
// namespace has fewer than the most, a deletion frees a place, a Job that
// turns foreign over the cap passes as deleted, and a list starts the count
// again on its first page only.
func TestForeignCap(t *testing.T) {
	job := func(ns, name, manager string) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{v1alpha1.OriginLabel: "here", v1alpha1.OriginUIDLabel: "uid-" + name}}}
		if manager != "" {
			j.Labels[v1alpha1.ManagerIDLabel] = manager
		}
		return j
	}
	var dropped []string
	f := newForeignCap("me", 2, func(job types.NamespacedName) { dropped = append(dropped, job.String()) })
	step := func(typ watch.EventType, j *batchv1.Job, wantPass bool, wantType watch.EventType) {
		t.Helper()
		out, pass := f.event(watch.Event{Type: typ, Object: j})
		if pass != wantPass || (pass && out.Type != wantType) {
			t.Errorf("%s %s/%s (manager %q): passed %v as %s, want %v as %s", typ, j.Namespace, j.Name, j.Labels[v1alpha1.ManagerIDLabel], pass, out.Type, wantPass, wantType)
		}
	}
	for i := range 5 {
		step(watch.Added, job("a", fmt.Sprintf("ours-%d", i), "me"), true, watch.Added)
	}
	step(watch.Added, job("a", "other-1", "other"), true, watch.Added)
	step(watch.Added, job("a", "unlabelled", ""), true, watch.Added)
	step(watch.Added, job("a", "other-2", "other"), false, "")
	// Said to be this manager's, but naming no manager Job, or being
	// deleted (a finalizer may keep it): foreign too.
	noOrigin := job("a", "no-origin", "me")
	noOrigin.Labels[v1alpha1.OriginUIDLabel] = ""
	step(watch.Added, noOrigin, false, "")
	deleting := job("a", "ours-4", "me")
	deleting.DeletionTimestamp = &metav1.Time{}
	step(watch.Modified, deleting, true, watch.Deleted)
	step(watch.Added, job("b", "other-3", "other"), true, watch.Added) // another namespace: places of its own
	step(watch.Modified, job("a", "other-1", "other"), true, watch.Modified)
	// Over the cap, a change passes as a deletion: it may have passed as
	// this manager's before.
	step(watch.Modified, job("a", "ours-0", "other"), true, watch.Deleted)
	step(watch.Modified, job("a", "other-2", "other"), true, watch.Deleted)
	// A deletion frees a place; a foreign Job that becomes this manager's
	// frees its own.
	step(watch.Deleted, job("a", "other-1", "other"), true, watch.Deleted)
	step(watch.Added, job("a", "other-4", "other"), true, watch.Added)
	step(watch.Modified, job("a", "unlabelled", "me"), true, watch.Modified)
	step(watch.Modified, job("a", "other-2", "other"), true, watch.Modified)
	step(watch.Added, job("a", "other-5", "other"), false, "")
	if want := []string{"a/other-2", "a/no-origin", "a/ours-4", "a/ours-0", "a/other-2", "a/other-5"}; !slices.Equal(dropped, want) {
		t.Errorf("told as not cached: %q, want %q", dropped, want)
	}
	// Bookmarks and errors pass as they are.
	if _, pass := f.event(watch.Event{Type: watch.Bookmark, Object: &batchv1.Job{}}); !pass {
		t.Error("a bookmark did not pass")
	}
	if _, pass := f.event(watch.Event{Type: watch.Error, Object: &metav1.Status{}}); !pass {
		t.Error("an error did not pass")
	}

	// A list replaces the store: its first page starts the count again, a
	// later page goes on with it.
	names := func(l *batchv1.JobList) (out []string) {
		for _, j := range l.Items {
			out = append(out, j.Name)
		}
		return out
	}
	first := &batchv1.JobList{Items: []batchv1.Job{*job("a", "x-1", "other"), *job("a", "ours-1", "me"), *job("a", "x-2", "")}}
	f.listed(true, first)
	if want := []string{"x-1", "ours-1", "x-2"}; !slices.Equal(names(first), want) {
		t.Errorf("first page kept %q, want %q", names(first), want)
	}
	next := &batchv1.JobList{Items: []batchv1.Job{*job("a", "x-3", "other"), *job("a", "ours-2", "me")}}
	f.listed(false, next)
	if want := []string{"ours-2"}; !slices.Equal(names(next), want) {
		t.Errorf("next page kept %q, want %q", names(next), want)
	}

	// A mirror being deleted (a finalizer or foreground deletion holding
	// it) under the cap stays, counted as foreign.
	small := newForeignCap("me", 1, nil)
	held := job("a", "ours-held", "me")
	held.DeletionTimestamp = &metav1.Time{}
	if out, pass := small.event(watch.Event{Type: watch.Modified, Object: held}); !pass || out.Type != watch.Modified {
		t.Errorf("a mirror being deleted under the cap passed %v as %s, want as MODIFIED", pass, out.Type)
	}
	if _, pass := small.event(watch.Event{Type: watch.Added, Object: job("a", "other", "other")}); pass {
		t.Error("a foreign Job passed where a mirror being deleted took the one place")
	}

	// Without a manager ID (one that labels nothing), nothing is foreign.
	none := newForeignCap("", 0, nil)
	if _, pass := none.event(watch.Event{Type: watch.Added, Object: job("a", "other", "other")}); !pass {
		t.Error("without a manager ID a Job was left out")
	}
}
