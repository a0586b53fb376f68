# Sourced by the tool builders: a cache of built tools outside the clone,
# so that a fresh clone on a machine that built them once builds none. Each
# binary is kept under its name, its pinned version and the Go release that
# built it, beside its SHA-256, and is used only when that still matches.
#
#   MUSTER_TOOL_CACHE (default ~/.cache/muster/tools)

tool_cache_dir=${MUSTER_TOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/muster/tools}

# tool_cache_key VERSION: what a cached binary must match.
tool_cache_key() {
	printf '%s-%s-%s' "${1//[^A-Za-z0-9._-]/_}" "$(go env GOVERSION)" "$(go env GOOS)_$(go env GOARCH)"
}

# tool_cache_fetch NAME KEY DEST copies a verified cached binary to DEST.
tool_cache_fetch() {
	local cached=$tool_cache_dir/$1-$2
	[[ -f $cached && -f $cached.sha256 ]] || return 1
	if [[ $(sha256sum "$cached" | cut -d' ' -f1) != "$(cat "$cached.sha256")" ]]; then
		echo "the cached $1 does not match its checksum; building it again" >&2
		rm -f "$cached" "$cached.sha256"
		return 1
	fi
	mkdir -p "$(dirname "$3")"
	cp "$cached" "$3"
	chmod 755 "$3"
}

# tool_cache_store NAME KEY SRC keeps a built binary.
tool_cache_store() {
	local cached=$tool_cache_dir/$1-$2
	mkdir -p "$tool_cache_dir"
	cp "$3" "$cached.partial"
	sha256sum "$cached.partial" | cut -d' ' -f1 > "$cached.sha256"
	mv "$cached.partial" "$cached"
}
