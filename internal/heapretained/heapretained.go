// Package heapretained measures what a cache keeps of the objects it is
// given, on the heap, for the caches' budget tests (only tests import it).
package heapretained

import "runtime"

// Bytes is the heap that what keep returns for n objects made by make
// holds: each object is made, passed to keep and dropped, what keep
// returned kept; after a collection the heap holds only that (and what it
// shares, such as canonical strings).
func Bytes(n int, make func(i int) any, keep func(any) any) int {
	kept := newKept(n)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		kept[i] = keep(make(i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	return int(int64(after.HeapAlloc) - int64(before.HeapAlloc))
}

func newKept(n int) []any { return make([]any, n) }
