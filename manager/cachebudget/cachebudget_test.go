package cachebudget

import "testing"

// A Meter names the first field that takes the object over its budget,
// by entries or by bytes, and counts nothing after it.
func TestMeterNamesTheFirstFieldOver(t *testing.T) {
	m := NewMeter(Budget{Entries: 4, Bytes: 100})
	m.Map("labels", map[string]string{"a": "b"})
	m.Add("finalizers", 1, 1)
	if m.Over() != nil {
		t.Fatalf("over after 2 entries and 3 bytes: %s", m.Over())
	}
	m.Add("tolerations", 3, 10)
	m.Add("status", 1, 1000)
	over := m.Over()
	if over == nil || over.Field != "tolerations" || over.Entries != 5 || over.Bytes != 13 {
		t.Fatalf("over %+v, want tolerations at 5 entries and 13 bytes", over)
	}
	if got, want := over.String(), "tolerations takes what the manager would keep of it to 5 entries and 13 bytes, over its budget of 4 entries and 100 bytes"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	bytes := NewMeter(Budget{Entries: 10, Bytes: 100})
	bytes.Add("status", 1, 101)
	if o := bytes.Over(); o == nil || o.Field != "status" {
		t.Errorf("101 bytes of a 100-byte budget: %+v", o)
	}
}

func TestBytes(t *testing.T) {
	for n, want := range map[int]string{0: "0 bytes", 1023: "1023 bytes", 1024: "1 KiB", 16 << 10: "16 KiB", 1536: "1.5 KiB", 1 << 20: "1 MiB", 1100000: "1 MiB", 1200000: "1.1 MiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
