// Package cachebudget bounds what the manager keeps of one object that
// others write: a Job on a worker that carries jobferry's labels (anyone
// who may create Jobs in a worker namespace can make one), a worker's
// capacity summary. Each cache adds up the fields it keeps of an object
// with a Meter; an object over its Budget is kept as its identity only (a
// tombstone) and the manager says so, so that what a cache holds grows
// with the number of objects, never with their size.
package cachebudget

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Cut is s cut to at most n bytes, as valid UTF-8, in a string of its own:
// a part of s would keep all of s alive.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.Clone(strings.ToValidUTF8(s[:n], ""))
}

// Budget is the most one object may hold in the fields a cache keeps of
// it: entries (map entries, list items, the strings of a list) and bytes
// (their encoded size, as protobuf gives it, or their strings' lengths).
// Entries bound what bytes do not: an empty toleration encodes in 2 bytes
// and costs the manager 72.
type Budget struct {
	Entries, Bytes int
}

// Mirror is the budget of a Job with jobferry's origin label on a worker:
// what the manager keeps of its spec and status. A mirror made from a
// manager Job holds a few dozen entries and a few KiB; one over this is
// read from its worker's API server when the manager created it (and
// never kept), and ignored otherwise.
var Mirror = Budget{Entries: 256, Bytes: 16 << 10}

// ManagerJob is the budget of a Job on the manager cluster that jobferry
// dispatches: what the manager keeps of its metadata (labels, jobferry's
// annotations) and its spec (the pod template's metadata, scheduling
// fields, what containers request and their security contexts, volumes).
// Its author may write anything there, and the manager keeps one per Job
// its tenants create; the admission webhook refuses a Job over this,
// naming the field.
var ManagerJob = Budget{Entries: 1024, Bytes: 64 << 10}

// ManagerJobCached is what the manager cluster's cache keeps of a manager
// Job whole: ManagerJob, and as much again for what jobferry adds to a Job
// it places (the worker's scheduling directives in its pod template). A
// Job over it (one created while the webhook was down) is kept as its
// identity only, and jobferry does not act on it.
var ManagerJobCached = Budget{Entries: 2 * ManagerJob.Entries, Bytes: 2 * ManagerJob.Bytes}

// JobStatus is the budget of a manager Job's status: jobferry's copy of
// its mirror's, so as large as a worker's Job controller writes — up to
// 500 uncounted pods of each kind, and completed and failed index lists
// of an Indexed Job of 100,000 completions — and what anyone who may
// update jobs/status on the manager writes. A Job whose status is over it
// is kept as its identity only, and not acted on.
var JobStatus = Budget{Entries: 2048, Bytes: 1 << 20}

// Capacity is the budget of a worker's capacity summary (ClusterCapacity):
// one object per worker, of pools whose nodes share labels and taints (20
// pools of 20 labels, 5 taints and 6 resources each hold 1,000 entries).
var Capacity = Budget{Entries: 2048, Bytes: 256 << 10}

func (b Budget) String() string {
	return fmt.Sprintf("%d entries and %s", b.Entries, Bytes(b.Bytes))
}

// Meter adds up what the kept fields of one object hold, field by field,
// against a budget, and remembers the first field that took the object
// over it. The zero Meter has no budget; use NewMeter.
type Meter struct {
	budget         Budget
	entries, bytes int
	over           *Over
}

// NewMeter is a Meter of budget b.
func NewMeter(b Budget) *Meter { return &Meter{budget: b} }

// Over says which field took an object over its budget, and how far.
type Over struct {
	// Field is the path of the field, as the API names it.
	Field string
	// Entries and Bytes are what the kept fields held up to and with Field.
	Entries, Bytes int
	Budget         Budget
}

func (o *Over) String() string {
	return fmt.Sprintf("%s takes what the manager would keep of it to %d entries and %s, over its budget of %s",
		o.Field, o.Entries, Bytes(o.Bytes), o.Budget)
}

// Add counts a field of entries entries and bytes bytes. Once the object
// is over its budget nothing more is counted: Over names the first field
// that took it there.
func (m *Meter) Add(field string, entries, bytes int) { m.AddField("", field, entries, bytes) }

// AddField is Add of the field prefix+name, whose path is made only when
// it takes the object over its budget.
func (m *Meter) AddField(prefix, name string, entries, bytes int) {
	if m.over != nil {
		return
	}
	m.entries += entries
	m.bytes += bytes
	if m.entries > m.budget.Entries || m.bytes > m.budget.Bytes {
		m.over = &Over{Field: prefix + name, Entries: m.entries, Bytes: m.bytes, Budget: m.budget}
	}
}

// Map counts a map of strings: an entry and the bytes of its key and value
// each.
func (m *Meter) Map(field string, v map[string]string) {
	bytes := 0
	for k, s := range v {
		bytes += len(k) + len(s)
	}
	m.Add(field, len(v), bytes)
}

// MapWhere counts the entries of a map of strings whose keys counts says
// are kept, as Map does (without making the smaller map).
func (m *Meter) MapWhere(field string, v map[string]string, counts func(key string) bool) {
	n, bytes := 0, 0
	for k, s := range v {
		if counts(k) {
			n, bytes = n+1, bytes+len(k)+len(s)
		}
	}
	m.Add(field, n, bytes)
}

// Over is nil while the object is within its budget.
func (m *Meter) Over() *Over { return m.over }

// Held is what the Meter counted: everything, while within its budget.
func (m *Meter) Held() (entries, bytes int) { return m.entries, m.bytes }

// Unbounded is a budget nothing is over, for a Meter that only counts.
var Unbounded = Budget{Entries: math.MaxInt, Bytes: math.MaxInt}

// Bytes is n bytes as a person reads it: 900 bytes, 16 KiB, 1.2 MiB.
func Bytes(n int) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return trimmed(float64(n)/(1<<10)) + " KiB"
	default:
		return trimmed(float64(n)/(1<<20)) + " MiB"
	}
}

// trimmed is f with one decimal, none when it is whole.
func trimmed(f float64) string {
	s := strconv.FormatFloat(f, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0")
}

// Measure counts what v holds (a pointer to a value of an API type):
// entries (map entries and list items, at any depth, but lists of numbers)
// and bytes (the length of each string, 8 for any other value), as a cache
// keeps it in memory, give or take each value's fixed size. A Quantity
// counts as its fixed size: one of a great many digits is larger (its
// decoding cost the manager that already).
func Measure(v any) (entries, bytes int) { return MeasureValue(reflect.ValueOf(v)) }

// MeasureValue is Measure of a reflected value.
func MeasureValue(v reflect.Value) (entries, bytes int) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return 0, 0
		}
		return MeasureValue(v.Elem())
	case reflect.Struct:
		layout := structLayout(v.Type())
		// Unexported fields (of a Quantity, a Time) are its value.
		bytes = 8 * layout.unexported
		for _, f := range layout.exported {
			e, b := MeasureValue(v.Field(f.Index))
			entries, bytes = entries+e, bytes+b
		}
		return entries, bytes
	case reflect.String:
		return 0, v.Len()
	case reflect.Slice, reflect.Array:
		switch v.Type().Elem().Kind() {
		case reflect.Uint8:
			return 0, v.Len()
		case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
			// Numbers (a pod failure policy's exit codes) cost their
			// size, in one array: bytes, not entries.
			return 0, 8 * v.Len()
		}
		entries = v.Len()
		for i := range v.Len() {
			e, b := MeasureValue(v.Index(i))
			entries, bytes = entries+e, bytes+b
		}
		return entries, bytes
	case reflect.Map:
		entries = v.Len()
		for it := v.MapRange(); it.Next(); {
			ek, bk := MeasureValue(it.Key())
			ev, bv := MeasureValue(it.Value())
			entries, bytes = entries+ek+ev, bytes+bk+bv
		}
		return entries, bytes
	case reflect.Invalid:
		return 0, 0
	}
	return 0, 8
}

// Field is an exported field of a struct type: its index and JSON name.
type Field struct {
	Index int
	Name  string
}

// layout is what Measure reads of a struct type.
type layout struct {
	exported   []Field
	unexported int
}

// layouts holds structLayout by type: reading a type's fields by
// reflection for every event of every manager Job was most of the meter's
// cost.
var layouts sync.Map // reflect.Type → *layout

func structLayout(t reflect.Type) *layout {
	if l, ok := layouts.Load(t); ok {
		return l.(*layout)
	}
	l := &layout{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			l.unexported++
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		l.exported = append(l.exported, Field{Index: i, Name: name})
	}
	layouts.Store(t, l)
	return l
}

// ExportedFields are the exported fields of struct type t.
func ExportedFields(t reflect.Type) []Field { return structLayout(t).exported }
