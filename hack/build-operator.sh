#!/usr/bin/env bash
# Builds one operator into bin/ from its module at an exact version, unless
# bin/ already holds it at that version, and copies its CRDs from the
# module's own manifests to bin/crds/NAME/, and its webhook configuration,
# when it has one, to bin/webhooks/NAME.yaml. An operator builds only inside
# its own module directory, with its own go.mod; the module proxy refuses
# version lists, so the version is named exactly.
#
#   hack/build-operator.sh NAME MODULE@VERSION PACKAGE CRD_FILES [WEBHOOK_FILE]
#
# CRD_FILES is a glob within the module, such as manifests/base/crds/*.yaml.
set -euo pipefail

name=$1
module_version=$2
package=$3
crd_files=$4
webhook_file=${5:-}
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/hack/module-dir.sh"
source "$root/hack/tool-cache.sh"
bin=$root/bin
stamp=$bin/.$name.version
if [[ -x $bin/$name && -f $stamp && $(cat "$stamp") == "$module_version" && -d $bin/crds/$name ]]; then
	exit 0
fi

dir=$(cd "$root" && module_dir "$module_version")
mkdir -p "$bin" "$bin/crds"
key=$(tool_cache_key "$module_version")
if tool_cache_fetch "$name" "$key" "$bin/$name"; then
	echo "$name ${module_version#*@} from $tool_cache_dir"
else
	echo "building $name ${module_version#*@}"
	(cd "$dir" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "$bin/$name" "$package")
	tool_cache_store "$name" "$key" "$bin/$name"
fi
rm -rf "$bin/crds/$name"
mkdir -p "$bin/crds/$name"
# shellcheck disable=SC2086 # the glob is meant to expand
cp "$dir"/$crd_files "$bin/crds/$name/"
rm -f "$bin/crds/$name/kustomization.yaml"
chmod 644 "$bin/crds/$name"/*.yaml
if [[ -n $webhook_file ]]; then
	mkdir -p "$bin/webhooks"
	cp "$dir/$webhook_file" "$bin/webhooks/$name.yaml"
	chmod 644 "$bin/webhooks/$name.yaml"
fi
echo "$module_version" > "$stamp"
