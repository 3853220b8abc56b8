package sharedstrings

import (
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// maxResourceLists bounds the table of shared resource lists: the distinct
// requests and limits of the Jobs' containers are few (a handful per
// tenant), and a list first seen once the table is full is kept as it is.
// Only small lists are shared (maxSharedResources, maxSharedKey): the
// table keeps what it holds until the manager restarts, and a tenant's
// Jobs may ask for any number of resources of any name, so at most
// 4,096 × 1 KiB of keys and the lists they name.
const (
	maxResourceLists   = 4096
	maxSharedResources = 8
	maxSharedKey       = 1 << 10
)

// resourceLists holds one map per distinct resource list (keyed by
// resourceListKey), shared by every cached Job whose container asks for
// the same: at 100,000 cached Jobs their decoded requests took 0.65 KiB
// per Job, a tenth of the manager's live heap. A shared map is never
// written: the caches' readers copy a Job before they change it.
var resourceLists = struct {
	sync.Mutex
	byKey map[string]corev1.ResourceList
}{byKey: map[string]corev1.ResourceList{}}

// ResourceList is the shared map equal to list (list itself when it is
// the first of its kind, or the table is full). The caller must never
// write the map it gets, nor list once it is shared.
func ResourceList(list corev1.ResourceList) corev1.ResourceList {
	if len(list) == 0 || len(list) > maxSharedResources {
		return list
	}
	key := resourceListKey(list)
	if len(key) > maxSharedKey {
		return list
	}
	resourceLists.Lock()
	defer resourceLists.Unlock()
	if shared, ok := resourceLists.byKey[key]; ok {
		return shared
	}
	if len(resourceLists.byKey) < maxResourceLists {
		resourceNames(list)
		resourceLists.byKey[key] = list
	}
	return list
}

// resourceListKey names a resource list by its content: each resource's
// name and canonical quantity, in order.
func resourceListKey(list corev1.ResourceList) string {
	names := make([]string, 0, len(list))
	for name := range list {
		names = append(names, string(name))
	}
	slices.Sort(names)
	var b strings.Builder
	for _, name := range names {
		q := list[corev1.ResourceName(name)]
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(q.String())
		b.WriteByte(';')
	}
	return b.String()
}
