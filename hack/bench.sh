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
# It then runs upstream's own gang benchmarks, unmodified from
# k8s.io/kubernetes's module (test/perf/upstream_test.go), for the
# in-tree profile in the harness's process (default), the in-tree profile
# as kube-scheduler's own process (intree) and muster, interleaved the same
# way.
#   BENCH_ROUNDS   rounds (default 3)
#   BENCH_LABELS   the workloads' label filter: performance, quick or large
#   BENCH_CASES    the workloads to run (default: all of them); the CPU
#                  profile is taken only when BENCH_PROFILE_CASE is among them
#   BENCH_UPSTREAM upstream's test cases to run, each Case or Case/Workload
#                  (default: the issue's two GangScheduling workloads at
#                  5000 nodes, every workload_preemption case,
#                  dra/workloadresourceclaims' two cases
#                  and the six TopologyAwareScheduling workloads at 5000
#                  nodes); none with BENCH_LABELS=quick
#   BENCH_UPSTREAM_PROFILES the profiles upstream's cases run under (default:
#                  default intree muster); the in-tree profile as a process
#                  of its own doubles the time of the slow in-tree side
#   BENCH_UPSTREAM_PROFILE the upstream Case/Workload of muster-scheduler's
#                  CPU profile, _output/bench/cpu-muster-upstream.pprof
#                  (default GangScheduling/5000Nodes_3Gangs_3000Pods_1000PerGroup)
#   BENCH_PROFILE_CASE the workload of muster's CPU profile (default GangFit10)
#   BENCH_DOC      the page to write (default docs/benchmarks.md)
#   BENCH_FINDINGS the hand-written findings it includes
#                  (default hack/benchtable/findings.md)
#   BENCH_TITLE    the page's title (default Benchmarks)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${BENCH_ROUNDS:-3}
labels=${BENCH_LABELS:-performance}
cases=${BENCH_CASES-SchedulingBasic GangFit3 GangFit10 GangFitDevices10 GangFit64 GangSize10 GangSize100 GangSize1000 GangSize5000 GangContention10 Mixed10 LaunchOrder9 LaunchOrder9Ready2s LaunchOrder9Paced LateLauncher9 PreemptionBasic GangPreemption50}
upstream_default="GangScheduling/5000Nodes_1000Gangs_3000Pods GangScheduling/5000Nodes_3Gangs_3000Pods_1000PerGroup GangPreemptionBasic GangPreemptionPodGroups GangPreemptionAffinity"
# Upstream's PodGroups sharing a claim, named or made from a template.
upstream_default+=" SharedPodGroupResourceClaim SharedPodGroupResourceClaimTemplate"
# Upstream's topology-aware gangs, its 5,000-node workloads: the in-tree
# profile takes about two minutes on each.
for tas in 750Gangs_3000Pods 1500Gangs_6000Pods 2250Gangs_9000Pods 3Gangs_3000Pods_1000PerGroup 6Gangs_6000Pods_1000PerGroup 9Gangs_9000Pods_1000PerGroup; do
	upstream_default+=" TopologyAwareScheduling/5000Nodes_$tas"
done
[[ $labels == quick ]] && upstream_default=""
upstream=${BENCH_UPSTREAM-$upstream_default}
upstream_profiles=${BENCH_UPSTREAM_PROFILES:-default intree muster}
out=$root/_output/bench
mkdir -p "$out"
: >"$out/results.txt"
: >"$out/profile-run.txt"
export PATH=$root/bin:$PATH # the harness starts bin/etcd
cd "$root/test/perf"
go test -tags bench -c -o "$out/perf.test" .
upstream_dir=$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/integration/scheduler_perf

run() { # run <results> <benchmark pattern> <log> [extra test flags]
	local results=$1 pattern=$2 log=$3
	shift 3
	"$out/perf.test" -test.run '^$' -test.bench "$pattern" -test.benchtime=1ns \
		-test.timeout 60m -perf-scheduling-label-filter="$labels" -data-items-dir "$out" \
		-upstream-perf-dir "$upstream_dir" "$@" 2>"$log" \
		| tee -a "$results" | grep -E '^(Benchmark|FAIL|---|PASS)' | cut -c1-160 >&2 || true
}

# upstream_benchmark <Case>: the benchmark that runs upstream's test case.
upstream_benchmark() {
	case $1 in
	GangScheduling) echo BenchmarkUpstreamGangScheduling ;;
	GangPreemption*) echo BenchmarkUpstreamWorkloadPreemption ;;
	TopologyAwareScheduling) echo BenchmarkUpstreamTopology ;;
	SharedPodGroupResourceClaim*) echo BenchmarkUpstreamWorkloadResourceClaims ;;
	*) echo "hack/bench.sh: no upstream benchmark runs $1" >&2; exit 1 ;;
	esac
}

for round in $(seq 1 "$rounds"); do
	for case in $cases; do
		for profile in default coscheduling muster; do
			echo "round $round of $rounds: $case-$profile" >&2
			run "$out/results.txt" "^BenchmarkPerfScheduling\$/^$case-$profile\$/" "$out/log-$round-$case-$profile.txt"
		done
	done
	for entry in $upstream; do
		case=${entry%%/*} workload=
		[[ $entry == */* ]] && workload=${entry#*/}
		for profile in $upstream_profiles; do
			echo "round $round of $rounds: upstream $entry-$profile" >&2
			run "$out/results.txt" "^$(upstream_benchmark "$case")\$/^$case-$profile\$/${workload:+^$workload\$}" "$out/log-$round-${entry//\//-}-$profile.txt"
		done
	done
done

doc=${BENCH_DOC:-docs/benchmarks.md}
findings=${BENCH_FINDINGS:-hack/benchtable/findings.md}
profile_case=${BENCH_PROFILE_CASE:-GangFit10}
profile=()
if [[ " $cases " == *" $profile_case "* ]]; then
	echo "CPU profile: $profile_case-muster" >&2
	run "$out/profile-run.txt" "^BenchmarkPerfScheduling\$/^$profile_case-muster\$/" "$out/log-profile.txt" -test.cpuprofile "$out/cpu-muster.pprof"
	profile=(-profile "$out/cpu-muster.pprof" -profile-workload "$profile_case")
fi

upstream_profile=${BENCH_UPSTREAM_PROFILE-GangScheduling/5000Nodes_3Gangs_3000Pods_1000PerGroup}
if [[ -n $upstream_profile && " $upstream " == *" $upstream_profile "* ]]; then
	echo "CPU profile of muster-scheduler: upstream $upstream_profile" >&2
	run "$out/profile-run.txt" "^$(upstream_benchmark "${upstream_profile%%/*}")\$/^${upstream_profile%%/*}-muster\$/^${upstream_profile#*/}\$" \
		"$out/log-profile-upstream.txt" -muster-cpu-profile "$out/cpu-muster-upstream.pprof"
fi

# The page names the command that made it, with every setting that was
# given, so that running that command makes the page again.
settings="BENCH_ROUNDS=$rounds BENCH_LABELS=$labels"
for name in BENCH_CASES BENCH_UPSTREAM BENCH_UPSTREAM_PROFILES BENCH_UPSTREAM_PROFILE BENCH_PROFILE_CASE BENCH_DOC BENCH_FINDINGS BENCH_TITLE; do
	[[ -v $name ]] && settings+=" $name=\"${!name}\""
done
cd "$root"
go run ./hack/benchtable -in "$out/results.txt" "${profile[@]}" -findings "$findings" -title "${BENCH_TITLE:-Benchmarks}" \
	-out "$doc" \
	-command "hack/bench.sh ($settings)"
echo "wrote $doc from $out/results.txt" >&2
