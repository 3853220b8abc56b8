package heapretained

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/randfill"
)

// Filler fills objects at random for a budget's property test: up to
// elements entries in each map and list, strings of up to strlen bytes,
// and quantities that parse (randfill's own would not).
func Filler(seed int64, elements, strlen int) *randfill.Filler {
	return randfill.NewWithSeed(seed).NilChance(0.2).NumElements(0, elements).MaxDepth(7).Funcs(
		func(s *string, c randfill.Continue) { *s = strings.Repeat("s", c.Intn(strlen+1)) },
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewQuantity(c.Int63n(1<<30), resource.DecimalSI)
		},
	)
}
