#!/usr/bin/env bash
# Builds scheduler-plugins' kube-scheduler (Coscheduling among its plugins)
# into bin/scheduler-plugins at an exact release, the benchmarks' baseline,
# unless bin/ already holds it. Its last release, v0.34.7, is built on
# Kubernetes 1.34 and cannot be linked into muster's 1.37 scheduler, so it
# is built in its own module and run as a process of its own.
#
# The module pins Kubernetes v1.34.7, whose staging modules the module
# proxy does not serve (k8s.io/csi-translation-lib v0.34.7: 403), so it is
# built with a copy of its go.mod (-modfile) that pins v1.34.4 instead, the
# nearest patch release the proxy serves; its own code is the release's.
#
#   hack/build-scheduler-plugins.sh MODULE@VERSION KUBE_VERSION
set -euo pipefail

module_version=$1
kube_version=$2
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/hack/module-dir.sh"
bin=$root/bin
stamp=$bin/.scheduler-plugins.version
want="$module_version kubernetes $kube_version"
if [[ -x $bin/scheduler-plugins && -f $stamp && $(cat "$stamp") == "$want" ]]; then
	exit 0
fi

echo "building scheduler-plugins ${module_version#*@} on Kubernetes $kube_version"
dir=$(cd "$root" && module_dir "$module_version")
modfile_dir=$bin/.scheduler-plugins-mod
mkdir -p "$modfile_dir"
# Every replace to the module's own Kubernetes release names kube_version
# (v1.x.y for k8s.io/kubernetes, v0.x.y for the staging modules).
pinned=$(sed -n 's/^[[:space:]]*k8s.io\/kubernetes => k8s.io\/kubernetes \(v1\.[0-9.]*\)$/\1/p' "$dir/go.mod")
sed -e "s/ v0${pinned#v1}\$/ v0${kube_version#v1}/" -e "s/ ${pinned}\$/ ${kube_version}/" "$dir/go.mod" >"$modfile_dir/go.mod"
cp "$dir/go.sum" "$modfile_dir/go.sum"
chmod 644 "$modfile_dir/go.mod" "$modfile_dir/go.sum"
# It calls itself the Kubernetes release it is built on, as kube-scheduler
# does: its compatibility checks read that version.
minor=${kube_version#v1.}
minor=${minor%%.*}
v=k8s.io/component-base/version
(cd "$dir" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -modfile="$modfile_dir/go.mod" -trimpath \
	-ldflags "-X $v.gitVersion=$kube_version -X $v.gitMajor=1 -X $v.gitMinor=$minor" \
	-o "$bin/scheduler-plugins" ./cmd/scheduler)
echo "$want" >"$stamp"
