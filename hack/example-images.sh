#!/usr/bin/env bash
# Builds the images of the real-node examples (manifests/examples/real-nodes)
# from Debian's packages, with mmdebstrap and no container engine or
# registry, as OCI archives in OUT. Each root filesystem is built with
# SOURCE_DATE_EPOCH fixed, and cached outside the clone by a key of its
# recipe: a warm run rebuilds nothing.
#
#   hack/example-images.sh OUT [NAME...]
set -euo pipefail

out=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${MUSTER_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/muster/images}
suite=bookworm
mirror="deb http://deb.debian.org/debian $suite main"
security="deb http://deb.debian.org/debian-security $suite-security main"
export SOURCE_DATE_EPOCH=0
# Every example image's tag, which the manifests name.
tag=debian12

# Each image: its Debian packages, and a hook run on its root filesystem.
declare -A packages=(
	# mpirun over SSH between pods: OpenMPI, mpi4py and sshd. The host keys
	# are made when a container starts, not baked in. As in mpi-operator's
	# images, ssh trusts the group's members, whose host keys nobody knows
	# in advance, and sshd takes keys from a Secret volume, whose directory
	# kubelet makes world-writable (StrictModes would refuse it).
	[muster-example-mpi]="openmpi-bin python3-mpi4py openssh-server"
	# torchrun with the gloo backend, from Debian's PyTorch 1.13, and the
	# nslookup that training-operator's init container for PyTorchJob
	# workers runs.
	[muster-example-torch]="python3-torch bind9-dnsutils"
	# A small Python, for TF_CONFIG.
	[muster-example-python]="python3"
)
declare -A hooks=(
	[muster-example-torch]='true'
	[muster-example-python]='true'
	[muster-example-mpi]='rm -f "$1"/etc/ssh/ssh_host_*; printf "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\nLogLevel ERROR\n" > "$1"/etc/ssh/ssh_config.d/muster.conf; echo "StrictModes no" > "$1"/etc/ssh/sshd_config.d/muster.conf'
)
names=("$@")
[[ ${#names[@]} -eq 0 ]] && names=("${!packages[@]}")

mkdir -p "$cache" "$out"
for name in "${names[@]}"; do
	[[ -n ${packages[$name]:-} ]] || { echo "no image $name; known: ${!packages[*]}" >&2; exit 1; }
	recipe="$tag|$suite|${packages[$name]}|${hooks[$name]}|$(mmdebstrap --version)|$(sha256sum "$root/hack/images/main.go" | cut -c1-64)"
	key=$(printf '%s' "$recipe" | sha256sum | cut -c1-16)
	image=$cache/$name-$key.oci.tar
	if [[ ! -f $image ]]; then
		echo "building $name from Debian's packages: ${packages[$name]}"
		rootfs=$cache/$name-$key.rootfs.tar
		mmdebstrap --quiet --format=tar --variant=essential --include="${packages[$name]// /,}" \
			--dpkgopt='path-exclude=/usr/share/{doc,man,locale,info}/*' \
			--customize-hook="${hooks[$name]}" \
			"$suite" "$rootfs.partial" "$mirror" "$security"
		mv "$rootfs.partial" "$rootfs"
		mkdir -p "$cache/$key"
		go run -C "$root" ./hack/images -rootfs "$rootfs" -out "$cache/$key" -version "$tag" "$name" >/dev/null
		mv "$cache/$key/$name.tar" "$image"
		rm -rf "$cache/$key" "$rootfs"
	fi
	ln -f "$image" "$out/$name.tar" 2>/dev/null || cp "$image" "$out/$name.tar"
done
