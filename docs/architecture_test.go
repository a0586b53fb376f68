package docs

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

const module = "github.com/muster-dev/muster"

// importRule is one row of docs/architecture.md's package table: the
// packages it is about and what they may import.
type importRule struct {
	packages []string
	allowed  []string
	// testsAllowed is what their tests may import beside: what the
	// row names after "tests also".
	testsAllowed []string
}

// allows says whether the rule lets its packages' own code import path.
func (r importRule) allows(path string) bool {
	return allowedBy(r.allowed, path)
}

// allowsTests says whether the rule lets its packages' tests import path.
func (r importRule) allowsTests(path string) bool {
	return allowedBy(r.allowed, path) || allowedBy(r.testsAllowed, path)
}

// allowedBy says whether one of the allowed paths allows path. Muster's
// own packages are named exactly; any other path by a prefix of whole
// elements.
func allowedBy(allowed []string, path string) bool {
	rel, own := strings.CutPrefix(path, module+"/")
	for _, a := range allowed {
		switch {
		case a == "*":
			return true
		case own:
			if rel == a {
				return true
			}
		case path == a || strings.HasPrefix(path, a+"/"):
			return true
		}
	}
	return false
}

var backticked = regexp.MustCompile("`([^`]+)`")

// readImportRules reads the package table of docs/architecture.md.
func readImportRules(t *testing.T) map[string]importRule {
	doc, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(doc), "\n## Packages\n")
	if !found {
		t.Fatal("docs/architecture.md has no Packages section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	rules := map[string]importRule{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) != 3 || !strings.HasPrefix(line, "| `") {
			continue
		}
		var rule importRule
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			rule.packages = append(rule.packages, m[1])
		}
		code, tests, _ := strings.Cut(cells[2], "tests also")
		for _, m := range backticked.FindAllStringSubmatch(code, -1) {
			rule.allowed = append(rule.allowed, m[1])
		}
		for _, m := range backticked.FindAllStringSubmatch(tests, -1) {
			rule.testsAllowed = append(rule.testsAllowed, m[1])
		}
		for _, p := range rule.packages {
			if _, twice := rules[p]; twice {
				t.Errorf("docs/architecture.md lists %s twice", p)
			}
			rules[p] = rule
		}
	}
	return rules
}

// listedPackage is a package of the module as `go list` tells it.
type listedPackage struct {
	path string
	// imports are its own code's; testImports its tests' of muster's
	// own packages.
	imports, testImports []string
}

// listPackages lists every package of pkg/ and cmd/ with its imports: its
// own code's, and for muster's own packages its tests' too.
func listPackages(t *testing.T) []listedPackage {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "../pkg/...", "../cmd/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var listed []listedPackage
	scanner := bufio.NewScanner(bytes.NewReader(out))
	scanner.Buffer(nil, 1<<20)
	for scanner.Scan() {
		fields := strings.Split(scanner.Text(), "\t")
		if !strings.HasPrefix(fields[0], module+"/pkg/") && !strings.HasPrefix(fields[0], module+"/cmd/") {
			continue
		}
		p := listedPackage{path: fields[0], imports: strings.Fields(fields[1])}
		for _, path := range strings.Fields(fields[2]) {
			if strings.HasPrefix(path, module+"/") && path != p.path {
				p.testImports = append(p.testImports, path)
			}
		}
		listed = append(listed, p)
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	return listed
}

// TestEveryPackageImportsOnlyWhatTheArchitectureAllows: the package table
// of docs/architecture.md is the rule of what may import what. Every
// package of pkg/ and cmd/ is in it, and imports nothing it does not
// allow: beside the standard library, only the paths its row names. Its
// tests may import no more of muster's own packages than the row allows
// them.
func TestEveryPackageImportsOnlyWhatTheArchitectureAllows(t *testing.T) {
	rules := readImportRules(t)
	listed := listPackages(t)
	if len(listed) == 0 {
		t.Fatal("go list found no package of pkg/ or cmd/")
	}
	for _, p := range listed {
		name := strings.TrimPrefix(p.path, module+"/")
		rule, found := rules[name]
		if !found {
			t.Errorf("docs/architecture.md's package table does not list %s: add its row, with what it may import", name)
			continue
		}
		for _, path := range p.imports {
			if !isStandard(path) && !rule.allows(path) {
				t.Errorf("%s imports %s, which docs/architecture.md does not allow it", name, strings.TrimPrefix(path, module+"/"))
			}
		}
		for _, path := range p.testImports {
			if !rule.allowsTests(path) {
				t.Errorf("the tests of %s import %s, which docs/architecture.md does not allow them", name, strings.TrimPrefix(path, module+"/"))
			}
		}
	}
}

// isStandard says whether path is the standard library's: its first
// element has no dot.
func isStandard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func TestAnImportRuleAllows(t *testing.T) {
	rule := importRule{allowed: []string{"k8s.io/api", "pkg/topology"}, testsAllowed: []string{"pkg/plugins/placement"}}
	cases := []struct {
		name string
		path string
		want bool
	}{
		{name: "a package under an allowed prefix", path: "k8s.io/api/core/v1", want: true},
		{name: "the prefix itself", path: "k8s.io/api", want: true},
		{name: "a path that only begins with the prefix's letters", path: "k8s.io/apimachinery/pkg/types", want: false},
		{name: "muster's own package named", path: module + "/pkg/topology", want: true},
		{name: "a package under muster's own package named", path: module + "/pkg/topology/sub", want: false},
		{name: "muster's own package not named", path: module + "/pkg/resources", want: false},
		{name: "a package only the tests may import", path: module + "/pkg/plugins/placement", want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := rule.allows(tc.path); got != tc.want {
				t.Errorf("allows(%q) = %v, want %v", tc.path, got, tc.want)
			}
		})
	}
	if !rule.allowsTests(module + "/pkg/plugins/placement") {
		t.Error("the tests may not import what the row names after \"tests also\"")
	}
	if !rule.allowsTests(module + "/pkg/topology") {
		t.Error("the tests may not import what the code may")
	}
	if !(importRule{allowed: []string{"*"}}).allows("example.com/anything") {
		t.Error("* allows nothing")
	}
}
