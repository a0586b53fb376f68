package figures

import (
	"math"
	"strings"
	"testing"
)

// TestEachFigureIsSVGNamingItsCategories: each kind of figure renders as
// SVG with its title and its categories' names, and a series of no
// numbers draws nothing rather than failing.
func TestEachFigureIsSVGNamingItsCategories(t *testing.T) {
	rounds := []Series{{Name: "muster / default", Values: [][]float64{{1.1, 1.2, 1.0}, {0.8, 0.9, 0.85}}}, {Name: "empty", Values: [][]float64{{math.NaN()}, {}}}}
	tests := []struct {
		name  string
		draw  func() ([]byte, error)
		texts []string
	}{
		{"rounds against a reference", func() ([]byte, error) {
			return Rounds("Throughput", "ratio", []string{"GangFit10", "GangFit64"}, 1, rounds)
		}, []string{"Throughput", "GangFit10", "GangFit64", "muster / default"}},
		{"lines on a log axis", func() ([]byte, error) {
			return Lines("Per member", "members", "ms", []float64{10, 1000}, true, rounds)
		}, []string{"Per member", "members", "muster / default"}},
		{"distributions", func() ([]byte, error) {
			return Distributions("Waits", "s", []string{"muster", "in-tree"}, []Series{{Name: "wait", Values: [][]float64{{1, 2, 3, 40}, {5, 6, 70}}}})
		}, []string{"Waits", "muster", "in-tree"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := tt.draw()
			if err != nil {
				t.Fatal(err)
			}
			svg := string(data)
			if !strings.Contains(svg, "<svg") {
				t.Fatalf("not SVG: %.80s", svg)
			}
			for _, text := range tt.texts {
				if !strings.Contains(svg, text) {
					t.Errorf("the figure does not say %q", text)
				}
			}
		})
	}
}
