package main

import (
	"reflect"
	"testing"
)

func TestBackUp(t *testing.T) {
	cases := map[string]struct {
		files []string
		edges [][2]string
		want  [][2]string
	}{
		"a chain runs down": {
			files: []string{"a.go", "b.go", "c.go"},
			edges: [][2]string{{"a.go", "b.go"}, {"b.go", "c.go"}},
		},
		"a loop of two: one import runs back up": {
			files: []string{"a.go", "b.go"},
			edges: [][2]string{{"a.go", "b.go"}, {"b.go", "a.go"}},
			want:  [][2]string{{"b.go", "a.go"}},
		},
		"a file many import that imports one back: that one import runs up": {
			files: []string{"a.go", "b.go", "c.go", "d.go"},
			edges: [][2]string{{"a.go", "d.go"}, {"b.go", "d.go"}, {"c.go", "d.go"}, {"d.go", "a.go"}},
			want:  [][2]string{{"d.go", "a.go"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := backUp(tc.files, tc.edges); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("backUp = %v, want %v", got, tc.want)
			}
		})
	}
}
