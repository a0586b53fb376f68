#!/usr/bin/env bash
# Builds one tool of the control plane into bin/, unless bin/ already holds it
# at the version its module pins. A tool is built from hack/tools/MODULE,
# MODULE being NAME unless given, when that module exists, else from
# hack/tools. NAME may hold a directory under bin/, as
# control-plane/VERSION/kube-apiserver does.
#
#   hack/build-tool.sh NAME PACKAGE [MODULE]
set -euo pipefail

name=$1
package=$2
module=${3:-$name}
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/hack/tool-cache.sh"
bin=$root/bin
module_dir=$root/hack/tools
[[ -f $module_dir/$module/go.mod ]] && module_dir=$module_dir/$module
cd "$module_dir"

module=$(go list -f '{{.Module.Path}}' "$package")
pinned=$(go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' "$module")
stamp=$(dirname "$bin/$name")/.$(basename "$name").version
if [[ -x $bin/$name && -f $stamp && $(cat "$stamp") == "$pinned" ]]; then
	exit 0
fi

ldflags=()
if [[ $module == sigs.k8s.io/kwok ]]; then
	ldflags=(-ldflags "-X sigs.k8s.io/kwok/pkg/consts.Version=${pinned#v}")
elif [[ $module == k8s.io/kubernetes ]]; then
	# Without these the binaries call themselves v0.0.0-master, and clients
	# that compare versions complain.
	minor=${pinned#v1.}
	minor=${minor%%.*}
	v=k8s.io/component-base/version
	ldflags=(-ldflags "-X $v.gitVersion=$pinned -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z")
fi

key=$(tool_cache_key "$pinned")
cached=${name//\//_}
mkdir -p "$(dirname "$bin/$name")"
if tool_cache_fetch "$cached" "$key" "$bin/$name"; then
	echo "$name $pinned from $tool_cache_dir"
else
	echo "building $name $pinned with $(go env GOVERSION)"
	CGO_ENABLED=0 go build -trimpath "${ldflags[@]}" -o "$bin/$name" "$package"
	tool_cache_store "$cached" "$key" "$bin/$name"
fi
echo "$pinned" > "$stamp"
