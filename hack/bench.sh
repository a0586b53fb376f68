#!/usr/bin/env bash
# `make bench` and `make bench-quick`: runs test/perf's workloads for the
# three scheduler profiles, interleaved (default, coscheduling, muster, then
# again) so that drift on a shared machine favours none, and writes the
# benchstat-compatible results to _output/bench/results.txt and the ratio
# table to docs/benchmarks.md.
#   BENCH_ROUNDS   rounds of the three profiles (default 3)
#   BENCH_LABELS   the workloads' label filter: performance, quick or large
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${BENCH_ROUNDS:-3}
labels=${BENCH_LABELS:-performance}
out=$root/_output/bench
mkdir -p "$out"
: >"$out/results.txt"
export PATH=$root/bin:$PATH # the harness starts bin/etcd
cd "$root/test/perf"
for round in $(seq 1 "$rounds"); do
	for profile in default coscheduling muster; do
		echo "round $round of $rounds: $profile" >&2
		go test -tags bench -run '^$' -bench "^BenchmarkPerfScheduling\$/-$profile\$/" -benchtime=1ns -timeout 120m \
			-perf-scheduling-label-filter="$labels" -data-items-dir "$out" . 2>"$out/log-$round-$profile.txt" \
			| tee -a "$out/results.txt" | grep -E '^(Benchmark|ok|FAIL|---)' >&2 || true
	done
done
cd "$root"
go run ./hack/benchtable -in "$out/results.txt" -out docs/benchmarks.md \
	-command "make $([[ $labels == quick ]] && echo bench-quick || echo bench) (BENCH_ROUNDS=$rounds BENCH_LABELS=$labels)"
echo "wrote docs/benchmarks.md from $out/results.txt" >&2
