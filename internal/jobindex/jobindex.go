// Package jobindex reads and writes the completion-index lists of a Job's
// status (status.completedIndexes and status.failedIndexes, "1,3-5,7"), the
// format the API server validates. The worker's Job controller and the status
// translation of the mirror package share it.
package jobindex

import (
	"strconv"
	"strings"
)

// Interval is a range of completion indexes, both ends included.
type Interval struct{ First, Last int }

// Intervals is a sorted list of disjoint, non-adjacent index ranges: the
// in-memory form of status.completedIndexes and status.failedIndexes.
type Intervals []Interval

// Parse reads the status form ("1,3-5,7"), dropping indexes at or
// beyond completions and malformed entries, like the upstream controller.
func Parse(s string, completions int) Intervals {
	if s == "" {
		return nil
	}
	var out Intervals
	for _, part := range strings.Split(s, ",") {
		limits := strings.Split(part, "-")
		first, err := strconv.Atoi(limits[0])
		if err != nil {
			continue
		}
		if first >= completions {
			break
		}
		last := first
		if len(limits) > 1 {
			if last, err = strconv.Atoi(limits[1]); err != nil {
				continue
			}
			last = min(last, completions-1)
		}
		if n := len(out); n > 0 && out[n-1].Last == first-1 {
			out[n-1].Last = last
		} else {
			out = append(out, Interval{first, last})
		}
	}
	return out
}

// WithIndexes returns the union with sorted single indexes.
func (iv Intervals) WithIndexes(sorted []int) Intervals {
	add := make(Intervals, len(sorted))
	for i, ix := range sorted {
		add[i] = Interval{ix, ix}
	}
	return iv.Merge(add)
}

func (iv Intervals) Merge(other Intervals) Intervals {
	var out Intervals
	push := func(next Interval) {
		if n := len(out); n == 0 || next.First > out[n-1].Last+1 {
			out = append(out, next)
		} else if out[n-1].Last < next.Last {
			out[n-1].Last = next.Last
		}
	}
	i, j := 0, 0
	for i < len(iv) && j < len(other) {
		if iv[i].First < other[j].First {
			push(iv[i])
			i++
		} else {
			push(other[j])
			j++
		}
	}
	for ; i < len(iv); i++ {
		push(iv[i])
	}
	for ; j < len(other); j++ {
		push(other[j])
	}
	return out
}

// Total is the number of indexes.
func (iv Intervals) Total() int {
	n := 0
	for _, r := range iv {
		n += r.Last - r.First + 1
	}
	return n
}

// Has reports whether ix is one of the indexes.
func (iv Intervals) Has(ix int) bool {
	for _, r := range iv {
		if ix < r.First {
			return false
		}
		if ix <= r.Last {
			return true
		}
	}
	return false
}

// String writes two consecutive indexes as "a,b" and longer runs as "a-c",
// the upstream format the API server validates.
func (iv Intervals) String() string {
	var b strings.Builder
	for _, r := range iv {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(r.First))
		switch {
		case r.Last == r.First+1:
			b.WriteByte(',')
			b.WriteString(strconv.Itoa(r.Last))
		case r.Last > r.First:
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(r.Last))
		}
	}
	return b.String()
}
