# Sourced by the scripts that build a tool inside its own module.
# module_dir <module@version>: downloads the module through the proxy and
# prints its directory in the module cache, or fails saying which module.
module_dir() {
	local dir
	dir=$(go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	if [[ -z $dir ]]; then
		echo "go mod download $1 gave no directory" >&2
		return 1
	fi
	echo "$dir"
}
