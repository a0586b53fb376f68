// Package docs holds the user documentation; its test keeps the
// documentation and the code from drifting apart.
package docs

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/muster-dev/muster/pkg/topology"
)

// TestUserGuideNamesEveryAnnotation: the user guide's table of PodGroup
// annotations lists exactly those pkg/topology accepts.
func TestUserGuideNamesEveryAnnotation(t *testing.T) {
	guide, err := os.ReadFile("user-guide.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(muster\\.dev/[a-z-]+)` \\|").FindAllSubmatch(guide, -1) {
		documented = append(documented, string(m[1]))
	}
	for _, name := range topology.Annotations {
		if !slices.Contains(documented, name) {
			t.Errorf("docs/user-guide.md does not document %s", name)
		}
	}
	for _, name := range documented {
		if !slices.Contains(topology.Annotations, name) {
			t.Errorf("docs/user-guide.md documents %s, which pkg/topology does not accept", name)
		}
	}
}
