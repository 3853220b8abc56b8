package jobcontroller

import (
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Pod failure back-off of the upstream controller: the n-th failure in a row
// (since the last success) delays the next pod creation by 10s·2^(n-1),
// capped at 10 minutes, counted from the last failure.
const (
	defaultPodFailureBackoff = 10 * time.Second
	maxPodFailureBackoff     = 10 * time.Minute
)

// backoffRecord is the failure streak of one Job.
type backoffRecord struct {
	failuresAfterLastSuccess int32
	lastFailureTime          *time.Time
}

// nextBackoffRecord folds the pods that finished since the last sync into the
// streak: a success resets it, later failures start a new one.
func nextBackoffRecord(prev backoffRecord, newSucceeded, newFailed []*corev1.Pod) backoffRecord {
	byFinish := func(pods []*corev1.Pod) {
		sort.SliceStable(pods, func(i, j int) bool { return finishedTime(pods[i]).Before(finishedTime(pods[j])) })
	}
	byFinish(newSucceeded)
	byFinish(newFailed)
	if len(newSucceeded) == 0 {
		if len(newFailed) == 0 {
			return prev
		}
		last := finishedTime(newFailed[len(newFailed)-1])
		return backoffRecord{failuresAfterLastSuccess: prev.failuresAfterLastSuccess + int32(len(newFailed)), lastFailureTime: &last}
	}
	next := backoffRecord{}
	lastSuccess := finishedTime(newSucceeded[len(newSucceeded)-1])
	for i := len(newFailed) - 1; i >= 0; i-- {
		failed := finishedTime(newFailed[i])
		if !failed.After(lastSuccess) {
			break
		}
		if next.lastFailureTime == nil {
			next.lastFailureTime = &failed
		}
		next.failuresAfterLastSuccess++
	}
	return next
}

// remaining is how long pod creation must still wait at now.
func (b backoffRecord) remaining(now time.Time) time.Duration {
	if b.failuresAfterLastSuccess == 0 || b.lastFailureTime == nil {
		return 0
	}
	delay := defaultPodFailureBackoff
	for i := int32(1); i < b.failuresAfterLastSuccess; i++ {
		delay *= 2
		if delay >= maxPodFailureBackoff {
			delay = maxPodFailureBackoff
			break
		}
	}
	elapsed := now.Sub(*b.lastFailureTime)
	if delay < elapsed {
		return 0
	}
	return delay - elapsed
}

// backoffStore keeps the streak per Job key. Like upstream it lives in
// memory only: a restarted controller starts without back-off.
type backoffStore struct {
	mu      sync.Mutex
	records map[string]backoffRecord
}

func (s *backoffStore) get(key string) backoffRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.records[key]
}

func (s *backoffStore) set(key string, r backoffRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.records == nil {
		s.records = map[string]backoffRecord{}
	}
	s.records[key] = r
}

func (s *backoffStore) remove(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.records, key)
}
