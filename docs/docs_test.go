// Package docs holds the user documentation; its test keeps the
// documentation and the code from drifting apart.
package docs

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/muster-dev/muster/pkg/gangview"
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

// TestTheTroubleshootingTableIsKubectlMustersOwn: the user guide's
// troubleshooting table lists exactly the troubles `kubectl muster why`
// answers with, in order.
func TestTheTroubleshootingTableIsKubectlMustersOwn(t *testing.T) {
	guide, err := os.ReadFile("user-guide.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(guide), "| you see | cause | fix |\n|---|---|---|\n")
	if !found {
		t.Fatal("docs/user-guide.md has no troubleshooting table")
	}
	var rows []string
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| ") {
			break
		}
		rows = append(rows, line)
	}
	var want []string
	for _, trouble := range gangview.Troubles {
		want = append(want, fmt.Sprintf("| %s | %s | %s |", trouble.Shows, trouble.Cause, trouble.Fix))
	}
	if !slices.Equal(rows, want) {
		t.Errorf("docs/user-guide.md's troubleshooting table is\n%s\nwant gangview.Troubles:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}
