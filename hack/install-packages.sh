#!/usr/bin/env bash
# Installs Debian packages that are not installed yet; nothing when all are.
#
#   hack/install-packages.sh PACKAGE...
set -euo pipefail

missing=()
for p in "$@"; do
	dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
echo "installing ${missing[*]} from Debian's packages"
sudo=
[[ $(id -u) != 0 ]] && sudo=sudo
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
