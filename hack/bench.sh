#!/usr/bin/env bash
# `make bench` and `make bench-quick`: runs test/perf's workloads for the
# three scheduler profiles, interleaved (for each workload: default,
# coscheduling, muster; then the next workload; then the next round) so
# that drift on a shared machine favours none. Each run is its own process:
# the harness resets only some metrics between workloads, and a plain
# histogram, such as the scheduler's attempts per pod, would carry over.
# Writes the benchstat-compatible results to _output/bench/results.txt, a
# CPU profile of muster in one workload to _output/bench/cpu-muster.pprof, and
# the ratio table to docs/benchmarks.md.
#   BENCH_ROUNDS   rounds (default 3)
#   BENCH_LABELS   the workloads' label filter: performance, quick or large
#   BENCH_CASES    the workloads to run (default: all of them); the CPU
#                  profile is taken only when BENCH_PROFILE_CASE is among them
#   BENCH_PROFILE_CASE the workload of muster's CPU profile (default GangFit10)
#   BENCH_DOC      the page to write (default docs/benchmarks.md)
#   BENCH_FINDINGS the hand-written findings it includes
#                  (default hack/benchtable/findings.md)
#   BENCH_TITLE    the page's title (default Benchmarks)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${BENCH_ROUNDS:-3}
labels=${BENCH_LABELS:-performance}
cases=${BENCH_CASES:-SchedulingBasic GangFit3 GangFit10 GangFit64 GangContention10 Mixed10 LaunchOrder9 LaunchOrder9Ready2s LaunchOrder9Paced LateLauncher9 PreemptionBasic GangPreemption50}
out=$root/_output/bench
mkdir -p "$out"
: >"$out/results.txt"
: >"$out/profile-run.txt"
export PATH=$root/bin:$PATH # the harness starts bin/etcd
cd "$root/test/perf"
go test -tags bench -c -o "$out/perf.test" .

run() { # run <results> <case> <profile> <log> [extra test flags]
	local results=$1 case=$2 profile=$3 log=$4
	shift 4
	"$out/perf.test" -test.run '^$' -test.bench "^BenchmarkPerfScheduling\$/^$case-$profile\$/" -test.benchtime=1ns \
		-test.timeout 60m -perf-scheduling-label-filter="$labels" -data-items-dir "$out" "$@" 2>"$log" \
		| tee -a "$results" | grep -E '^(Benchmark|FAIL|---|PASS)' | cut -c1-160 >&2 || true
}

for round in $(seq 1 "$rounds"); do
	for case in $cases; do
		for profile in default coscheduling muster; do
			echo "round $round of $rounds: $case-$profile" >&2
			run "$out/results.txt" "$case" "$profile" "$out/log-$round-$case-$profile.txt"
		done
	done
done

doc=${BENCH_DOC:-docs/benchmarks.md}
findings=${BENCH_FINDINGS:-hack/benchtable/findings.md}
profile_case=${BENCH_PROFILE_CASE:-GangFit10}
profile=()
if [[ " $cases " == *" $profile_case "* ]]; then
	echo "CPU profile: $profile_case-muster" >&2
	run "$out/profile-run.txt" "$profile_case" muster "$out/log-profile.txt" -test.cpuprofile "$out/cpu-muster.pprof"
	profile=(-profile "$out/cpu-muster.pprof" -profile-workload "$profile_case")
fi

cd "$root"
go run ./hack/benchtable -in "$out/results.txt" "${profile[@]}" -findings "$findings" -title "${BENCH_TITLE:-Benchmarks}" \
	-out "$doc" \
	-command "make $([[ $labels == quick ]] && echo bench-quick || echo bench) (BENCH_ROUNDS=$rounds BENCH_LABELS=$labels${BENCH_CASES:+ BENCH_CASES=\"$cases\"}${BENCH_DOC:+ BENCH_DOC=$doc})"
echo "wrote $doc from $out/results.txt" >&2
