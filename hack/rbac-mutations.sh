#!/usr/bin/env bash
# Shows that manifests/rbac holds no rule muster does not need: it removes
# each rule of each Role and ClusterRole in turn, runs the integration test
# that proves the rule, and reports whether the test failed, as it must. A
# rule is proven by the test a "# proven by: PACKAGE TEST" line right above
# it names, else by the test that runs an example job with the manifests'
# ServiceAccounts. Needs `make tools build`.
#   hack/rbac-mutations.sh                                # every file, about 20 minutes
#   hack/rbac-mutations.sh manifests/rbac/scheduler.yaml  # one file
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
default_proof="./test/integration TestManifestsRBACSufficesForAnExampleJob"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The rules are compiled into the test: mutate a copy of the tree, so that
# the working tree is never changed. The copy uses this tree's bin/.
mkdir "$work/repo"
tar -C "$root" --exclude=./bin --exclude=./_output --exclude=./.git -cf - . | tar -C "$work/repo" -xf -
export MUSTER_BIN_DIR=$root/bin
cd "$work/repo"

survived=0
files=("$@")
if ((${#files[@]} == 0)); then
	files=(manifests/rbac/scheduler.yaml manifests/rbac/controller.yaml)
fi
for file in "${files[@]}"; do
	cp "$file" "$work/original"
	rules=$(grep -c '^  - apiGroups:' "$file")
	for i in $(seq 1 "$rules"); do
		# Drop the i-th rule: its "  - apiGroups:" line and the lines
		# indented under it.
		awk -v n="$i" '/^  - apiGroups:/ { k++; skip = (k == n) } /^(---|[^ ]|  [^ -])/ { skip = 0 } !skip' "$work/original" >"$file"
		rule=$(awk -v n="$i" '/^  - apiGroups:/ { k++; on = (k == n) } /^(---|[^ ]|  [^ -])/ { on = 0 } on' "$work/original" | tr -s ' \n' ' ')
		# The "# proven by:" line among the comment lines above the rule.
		proof=$(awk -v n="$i" '/^  # proven by: / { p = substr($0, 16); next } /^  - apiGroups:/ { if (++k == n) { print p; exit } p = ""; next } !/^  #/ { p = "" }' "$work/original")
		read -r package test <<<"${proof:-$default_proof}"
		if go test -count=1 -timeout 8m -run "^$test\$" "$package" >"$work/log" 2>&1; then
			echo "STILL PASSES without ($file) $rule, in $package $test"
			survived=$((survived + 1))
		else
			why=$(grep -m1 -E 'was refused by RBAC|Error Trace|waiting for|starting|FAIL:' "$work/log" | cut -c1-160 || true)
			echo "fails without ($file) $rule, in $package $test"
			echo "    $why"
		fi
		cp "$work/original" "$file"
	done
done
if ((survived > 0)); then
	echo "$survived rule(s) are not needed by the test that should prove them"
	exit 1
fi
echo "every rule is needed"
