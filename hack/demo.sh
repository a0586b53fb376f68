#!/usr/bin/env bash
# `make demo`: a local cluster with 4 simulated nodes, muster-scheduler and
# muster-controller running as their manifests' ServiceAccounts, and every
# example: where each pod went, how gangs were admitted, and each framework
# job's timeline and injected environment; then a cluster of 2 real nodes,
# muster installed on it from manifests/, and MPI across its pods. It exits
# non-zero if a job does not run in order. KEEP=1 leaves the clusters
# running for kubectl.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/bin
dir=$root/_output/demo
# The real-node scene's cluster, beside the simulated one.
real_dir=$root/_output/demo-real-nodes
kubectl() { "$bin/kubectl" --kubeconfig "${kubeconfig:-$dir/kubeconfig}" "$@"; }
# kubectl muster, the plugin make build writes: how a user sees gangs.
muster() { "$bin/kubectl-muster" --kubeconfig "${kubeconfig:-$dir/kubeconfig}" "$@"; }
say() { if [[ -t 1 ]]; then printf '\n\033[1m== %s\033[0m\n' "$*"; else printf '\n== %s\n' "$*"; fi; }
# events NAMESPACE CONDITION lists the namespace's events, oldest first,
# that the awk CONDITION keeps: $1 is what one is about, $2 its reason.
events() {
	kubectl get events.events.k8s.io --namespace "$1" --sort-by .metadata.resourceVersion \
		-o custom-columns='ABOUT:.regarding.name,REASON:.reason,NOTE:.note' | awk "NR == 1 || ($2)"
}
# bound_after_ready NAMESPACE POD PREDECESSOR... fails the demo unless POD
# was bound no earlier than each predecessor became Ready.
bound_after_ready() {
	local ns=$1 pod=$2 bound ready predecessor
	shift 2
	bound=$(kubectl get pod "$pod" --namespace "$ns" -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].lastTransitionTime}')
	for predecessor in "$@"; do
		ready=$(kubectl get pod "$predecessor" --namespace "$ns" -o jsonpath='{.status.conditions[?(@.type=="Ready")].lastTransitionTime}')
		if [[ -z $bound || -z $ready || $bound < $ready ]]; then
			echo "$pod was bound at $bound, before $predecessor was Ready at $ready" >&2
			exit 1
		fi
	done
}

# watched_bound_after_ready FILE JOB fails the demo unless, in the pods a
# watch wrote to FILE, the MPIJob's launcher was bound no earlier than
# each of its workers became Ready.
watched_bound_after_ready() {
	python3 - "$1" "$2" <<'PY'
import json, sys
path, job = sys.argv[1], sys.argv[2]
text, decoder, at, pods = open(path).read(), json.JSONDecoder(), 0, []
while True:
    while at < len(text) and text[at].isspace():
        at += 1
    if at == len(text):
        break
    pod, at = decoder.raw_decode(text, at)
    pods.append(pod)
bound, ready = {}, {}
for pod in pods:
    labels = pod["metadata"].get("labels", {})
    if labels.get("training.kubeflow.org/job-name") != job:
        continue
    name, role = pod["metadata"]["name"], labels.get("training.kubeflow.org/job-role")
    for c in pod.get("status", {}).get("conditions", []):
        if role == "launcher" and c["type"] == "PodScheduled" and c["status"] == "True":
            bound[name] = c["lastTransitionTime"]
        if role == "worker" and c["type"] == "Ready" and c["status"] == "True":
            ready[name] = c["lastTransitionTime"]
if not bound or len(ready) < 2 or min(bound.values()) < max(ready.values()):
    sys.exit(f"job {job}: launcher bound at {bound}, workers Ready at {ready}: want the launcher bound after both workers were Ready")
print(f"job {job}: launcher bound at {min(bound.values())}, after its workers were Ready at {sorted(ready.values())}")
PY
}

# Clusters left by an earlier KEEP=1 run go first.
for d in "$dir" "$real_dir"; do
	if [[ -f $d/state.json ]]; then
		"$bin/muster-local" down --dir "$d"
	fi
done

say "Starting a local control plane with 4 simulated nodes, serving upstream's Workload API too"
"$bin/muster-local" up --dir "$dir" --nodes 4 --workload-api
# On failure, what every program said last and where the pods are, before
# the cluster and its logs go (KEEP=1 keeps both).
finish() {
	local status=$?
	if [[ -n ${team_a_watch:-} ]]; then
		kill "$team_a_watch" 2>/dev/null || true
	fi
	if [[ $status != 0 ]]; then
		for log in "$dir"/logs/*.log "$real_dir"/logs/*.log; do
			[[ -f $log ]] || continue
			printf '\n--- the end of %s\n' "$log"
			tail -n 15 "$log"
		done >&2
		kubectl get pods --all-namespaces -o wide >&2 || true
	fi
	if [[ ${KEEP:-} != 1 ]]; then
		"$bin/muster-local" down --dir "$dir"
		if [[ -f $real_dir/state.json ]]; then
			"$bin/muster-local" down --dir "$real_dir"
		fi
	fi
	return "$status"
}
trap finish EXIT

say "muster-scheduler and muster-controller run as the ServiceAccounts of manifests/rbac"
kubectl get serviceaccounts,roles,rolebindings --namespace muster-system
kubectl get clusterroles,clusterrolebindings --selector='!kubernetes.io/bootstrapping' | grep muster

say "The whole install, kubectl apply -k manifests/, as a server-side dry run"
kubectl apply --dry-run=server -k "$root/manifests"

say "Applying manifests/examples/hello-pods.yaml"
kubectl apply -f "$root/manifests/examples/hello-pods.yaml"
kubectl wait --namespace muster-demo --for=condition=Ready pod --selector app=hello --timeout=120s

say "Where each pod went"
kubectl get pods --namespace muster-demo --sort-by .metadata.name \
	-o custom-columns='POD:.metadata.name,SCHEDULER:.spec.schedulerName,NODE:.spec.nodeName,PHASE:.status.phase,STARTED:.status.startTime,READY-SINCE:.status.conditions[?(@.type=="Ready")].lastTransitionTime'

say "Who bound them (Scheduled events)"
kubectl get events.events.k8s.io --namespace muster-demo --field-selector reason=Scheduled \
	-o custom-columns='POD:.regarding.name,REPORTED-BY:.reportingController,NOTE:.note'

echo
echo "hello-* were bound by muster-scheduler to simulated nodes and run there;"
echo "hello-slow became Ready 5s after it started (muster.dev/sim-ready-after)."
echo "not-for-muster asks for the default scheduler, so muster-scheduler left it Pending."

say "Gangs: applying manifests/examples/gangs.yaml"
kubectl apply -f "$root/manifests/examples/gangs.yaml"
kubectl wait --namespace muster-demo --for=condition=Ready pod --selector scheduling.x-k8s.io/pod-group=train --timeout=120s
kubectl wait --namespace muster-demo --for=jsonpath='{.status.conditions[?(@.type=="PodScheduled")].reason}'=SchedulingGated pod/short-0 pod/short-1 --timeout=120s
# The huge gang's rejection is an event on its PodGroup.
for _ in $(seq 100); do
	kubectl get events.events.k8s.io --namespace muster-demo --field-selector reason=GangRejected -o name | grep -q . && break
	sleep 0.2
done

say "The gangs, as kubectl muster gangs shows them"
muster gangs --namespace muster-demo

say "Why short and huge wait: kubectl muster describe gang huge, kubectl muster why short-0"
muster describe gang huge --namespace muster-demo
echo
muster why short-0 --namespace muster-demo

say "What the scheduler and the controller said about the groups"
kubectl get events.events.k8s.io --namespace muster-demo --sort-by .metadata.resourceVersion \
	-o custom-columns='GROUP:.regarding.name,REASON:.reason,FROM:.reportingController,NOTE:.note' \
	| awk 'NR == 1 || $2 ~ /^Gang|^Phase|^WaitingForMembers/'

echo
echo "train was admitted whole: its 4 pods were bound in one step."
echo "short has 2 of its 3 pods; they wait, and say so, until the third exists."
echo "huge cannot fit on any node; it was rejected whole, with nothing bound, and backs off."
say "Upstream's group API: applying manifests/examples/upstream-gang.yaml"
grep '"Reading groups from PodGroups"' "$dir/logs/muster-scheduler.log" | sed 's/^.*\] //'
grep -h '"Serving groups from PodGroups"' "$dir"/logs/muster-controller*.log | sed 's/^.*\] //' | sort -u
kubectl apply -f "$root/manifests/examples/upstream-gang.yaml"
kubectl wait --namespace muster-demo --for=condition=Ready pod/upstream-launcher-0 --timeout=120s >/dev/null
muster describe gang upstream --namespace muster-demo
kubectl get pods --namespace muster-demo --selector muster.dev/role --sort-by .metadata.name \
	-o custom-columns='POD:.metadata.name,ROLE:.metadata.labels.muster\.dev/role,BOUND:.status.conditions[?(@.type=="PodScheduled")].lastTransitionTime,READY:.status.conditions[?(@.type=="Ready")].lastTransitionTime'
events muster-demo '$1 ~ /^upstream/ && $2 ~ /^Gang|^Launch/'
bound_after_ready muster-demo upstream-launcher-0 upstream-worker-0 upstream-worker-1
echo
echo "What muster-controller gave the launcher, and the group's hostfile (ConfigMap upstream-muster):"
kubectl get pod upstream-launcher-0 --namespace muster-demo \
	-o jsonpath='{"muster.dev/upstream-pod-group="}{.metadata.labels.muster\.dev/upstream-pod-group}{"\nhostname="}{.spec.hostname}.{.spec.subdomain}{"\n"}{range .spec.containers[0].env[?(@.name=="OMPI_MCA_orte_default_hostfile")]}{.name}={.value}{"\n"}{end}'
kubectl get configmap upstream-muster --namespace muster-demo -o jsonpath='{.data.hostfile}'
echo
echo "The gang lives in a scheduling.k8s.io PodGroup: muster-scheduler admitted it"
echo "whole and bound the launcher only once both workers were Ready; muster-controller"
echo "gave its members their names, MPI environment and hostfile, as for a labelled group."

say "Every framework: TensorFlow, PyTorch (static and elastic), MPI and MXNet"
"$bin/muster-local" tour --dir "$dir" --examples "$root/manifests/examples" --namespace muster-tour

say "Kubeflow's training-operator, run with --gang-scheduler-name=muster-scheduler"
# Its MPIJob v1 CRD has the name of mpi-operator's MPIJob v2beta1: the
# demo runs mpi-operator for MPI jobs.
"$bin/muster-local" training-operator --dir "$dir" --schemes pytorchjob,tfjob
kubectl create namespace muster-operators >/dev/null
echo "Applying manifests/examples/operators/pytorchjob.yaml: a PyTorchJob with no muster annotation"
# The operator registers its webhook handlers a moment after it is ready.
for attempt in $(seq 50); do
	kubectl apply --namespace muster-operators -f "$root/manifests/examples/operators/pytorchjob.yaml" 2>/dev/null && break
	[[ $attempt == 50 ]] && kubectl apply --namespace muster-operators -f "$root/manifests/examples/operators/pytorchjob.yaml"
	sleep 0.2
done
for _ in $(seq 600); do
	[[ $(kubectl get pods --namespace muster-operators --selector training.kubeflow.org/job-name=pt-mnist -o name | wc -l) == 3 ]] && break
	sleep 0.2
done
kubectl wait --namespace muster-operators --for=condition=Ready pod --selector training.kubeflow.org/job-name=pt-mnist --timeout=120s >/dev/null

say "What muster derived from the PyTorchJob, on the PodGroup the operator made"
kubectl get podgroups.scheduling.x-k8s.io pt-mnist --namespace muster-operators \
	-o jsonpath='derived-from: {.metadata.annotations.muster\.dev/derived-from}{"\n"}framework:    {.metadata.annotations.muster\.dev/framework}{"\n"}roles:        {.metadata.annotations.muster\.dev/roles}{"\n"}minMember:    {.spec.minMember}{"\n"}'

say "The job's pods: bound in order, with the operator's environment"
kubectl get pods --namespace muster-operators --sort-by .metadata.name \
	-o custom-columns='POD:.metadata.name,ROLE:.metadata.labels.training\.kubeflow\.org/replica-type,BOUND:.status.conditions[?(@.type=="PodScheduled")].lastTransitionTime,READY:.status.conditions[?(@.type=="Ready")].lastTransitionTime,MASTER_ADDR:.spec.containers[0].env[?(@.name=="MASTER_ADDR")].value,MUSTER-ADDED:.metadata.annotations.muster\.dev/added'
events muster-operators '$2 ~ /^Topology|^Gang|^Launch/'

for worker in pt-mnist-worker-0 pt-mnist-worker-1; do
	bound_after_ready muster-operators "$worker" pt-mnist-master-0
done
echo
echo "training-operator made the PodGroup; muster read the master and workers from"
echo "the PyTorchJob, bound the gang whole and the workers only once the master was"
echo "Ready, and added nothing to the operator's pods."

say "Kubeflow's mpi-operator, run with --gang-scheduling=muster-scheduler"
"$bin/muster-local" mpi-operator --dir "$dir"
echo "Applying manifests/examples/operators/mpijob.yaml: the launcher is created only once the workers are Ready"
kubectl apply --namespace muster-operators -f "$root/manifests/examples/operators/mpijob.yaml"
for _ in $(seq 600); do
	kubectl get pods --namespace muster-operators --selector training.kubeflow.org/job-name=pi,training.kubeflow.org/job-role=launcher \
		-o jsonpath='{.items[*].spec.nodeName}' | grep -q . && break
	sleep 0.2
done

say "The MPIJob's gang and pods: admitted before its launcher existed"
muster describe gang pi --namespace muster-operators
kubectl get pods --namespace muster-operators --selector training.kubeflow.org/job-name=pi --sort-by .metadata.creationTimestamp \
	-o custom-columns='POD:.metadata.name,ROLE:.metadata.labels.training\.kubeflow\.org/job-role,CREATED:.metadata.creationTimestamp,BOUND:.status.conditions[?(@.type=="PodScheduled")].lastTransitionTime,READY:.status.conditions[?(@.type=="Ready")].lastTransitionTime,NODE:.spec.nodeName'
events muster-operators '$1 ~ /^pi/ && $2 ~ /^Topology|^Gang|^Late/'
launcher_node=$(kubectl get pods --namespace muster-operators --selector training.kubeflow.org/job-name=pi,training.kubeflow.org/job-role=launcher -o jsonpath='{.items[0].spec.nodeName}')
if [[ -z $launcher_node ]]; then
	echo "the launcher of MPIJob pi was not bound" >&2
	exit 1
fi
echo
echo "mpi-operator's PodGroup counts the launcher; muster admitted the two workers"
echo "with the launcher's room held, and bound the launcher into it on $launcher_node"
echo "once the operator created it: no deadlock, and no wait for room."

say "JobSet, whose pod templates name muster-scheduler"
"$bin/muster-local" jobset --dir "$dir"
echo "Applying manifests/examples/operators/jobset.yaml: the launcher depends on the workers being Ready"
for _ in $(seq 100); do
	# The controller registers its webhook handlers a moment after it is ready.
	kubectl apply --namespace muster-operators -f "$root/manifests/examples/operators/jobset.yaml" 2>/dev/null && break
	sleep 0.2
done
for _ in $(seq 600); do
	kubectl get pods --namespace muster-operators --selector jobset.sigs.k8s.io/jobset-name=js-mpi,jobset.sigs.k8s.io/replicatedjob-name=launcher \
		-o jsonpath='{.items[*].spec.nodeName}' | grep -q . && break
	sleep 0.2
done

say "The PodGroup muster made for the JobSet, and its pods"
kubectl get podgroups.scheduling.x-k8s.io js-mpi --namespace muster-operators \
	-o jsonpath='owner:        {.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}{"\n"}roles:        {.metadata.annotations.muster\.dev/roles}{"\n"}launch order: {.metadata.annotations.muster\.dev/launch-order}{"\n"}minMember:    {.spec.minMember}{"\n"}late members: {.metadata.annotations.muster\.dev/late-members}{"\n"}'
kubectl get pods --namespace muster-operators --selector jobset.sigs.k8s.io/jobset-name=js-mpi --sort-by .metadata.creationTimestamp \
	-o custom-columns='POD:.metadata.name,ROLE:.metadata.labels.jobset\.sigs\.k8s\.io/replicatedjob-name,HOSTNAME:.spec.hostname,CREATED:.metadata.creationTimestamp,BOUND:.status.conditions[?(@.type=="PodScheduled")].lastTransitionTime,READY:.status.conditions[?(@.type=="Ready")].lastTransitionTime,NODE:.spec.nodeName'
events muster-operators '$1 ~ /^js-mpi/ && $2 ~ /^PodGroupCreated|^Gang|^Late/'
jobset_launcher=$(kubectl get pods --namespace muster-operators --selector jobset.sigs.k8s.io/jobset-name=js-mpi,jobset.sigs.k8s.io/replicatedjob-name=launcher -o jsonpath='{.items[0].spec.nodeName}')
if [[ -z $jobset_launcher ]]; then
	echo "the launcher of JobSet js-mpi was not bound" >&2
	exit 1
fi
echo
echo "JobSet made no PodGroup; muster made one from the JobSet, admitted the workers"
echo "with the launcher's room held, and bound the launcher into it on $jobset_launcher"
echo "once JobSet created it after the workers were Ready."

say "Kubeflow Trainer, whose runtime names muster-scheduler and asks for a coscheduling PodGroup"
"$bin/muster-local" trainer --dir "$dir"
echo "Applying manifests/examples/operators/trainjob.yaml: a dataset initializer, then three torch nodes"
for _ in $(seq 100); do
	# Trainer registers its webhook handlers a moment after it is ready.
	kubectl apply --namespace muster-operators -f "$root/manifests/examples/operators/trainjob.yaml" 2>/dev/null && break
	sleep 0.2
done
trainjob_state=
for _ in $(seq 600); do
	trainjob_state=$(kubectl get trainjob fine-tune --namespace muster-operators -o jsonpath='{.status.conditions[?(@.type=="Complete")].status}')
	[[ $trainjob_state == True ]] && break
	sleep 0.2
done

say "Trainer's PodGroup, with the group muster read from the TrainJob, and its pods"
kubectl get podgroups.scheduling.x-k8s.io fine-tune --namespace muster-operators \
	-o jsonpath='owner:        {.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}{"\n"}framework:    {.metadata.annotations.muster\.dev/framework}{"\n"}roles:        {.metadata.annotations.muster\.dev/roles}{"\n"}minMember:    {.spec.minMember}{"\n"}'
kubectl get pods --namespace muster-operators --selector jobset.sigs.k8s.io/jobset-name=fine-tune --sort-by .metadata.creationTimestamp \
	-o custom-columns='POD:.metadata.name,ROLE:.metadata.labels.jobset\.sigs\.k8s\.io/replicatedjob-name,GROUP:.metadata.labels.scheduling\.x-k8s\.io/pod-group,BOUND:.status.conditions[?(@.type=="PodScheduled")].lastTransitionTime,PHASE:.status.phase,NODE:.spec.nodeName'
events muster-operators '$1 == "fine-tune" && $2 ~ /^TopologyDerived|^MinMemberLowered|^Gang/'
echo "A node's environment, all Trainer's, and what muster added to the pod:"
kubectl get pods --namespace muster-operators --selector jobset.sigs.k8s.io/jobset-name=fine-tune,jobset.sigs.k8s.io/replicatedjob-name=node \
	-o jsonpath='{range .items[0].spec.containers[0].env[*]}  {.name}={.value}{"\n"}{end}  muster.dev/added: {.items[0].metadata.annotations.muster\.dev/added}{"\n"}'
if [[ $trainjob_state != True ]]; then
	echo "TrainJob fine-tune did not complete" >&2
	exit 1
fi
echo
echo "Trainer's PodGroup counted the initializer, which must finish before the"
echo "nodes exist; muster ran it first, alone, made the three nodes the gang,"
echo "and the TrainJob completed with Trainer's environment as Trainer wrote it."

say "Every operator's gang, each read from its job: kubectl muster gangs"
muster gangs --namespace muster-operators

# running NAMESPACE GROUP... counts the groups' Running pods.
running() {
	local namespace=$1 groups
	shift
	groups=$(IFS=,; echo "$*")
	kubectl get pods --namespace "$namespace" --field-selector status.phase=Running --selector "scheduling.x-k8s.io/pod-group in ($groups)" -o name | wc -l
}

# wait_running NAMESPACE COUNT GROUP... waits up to a minute until the
# groups have COUNT Running pods between them.
wait_running() {
	local namespace=$1 count=$2
	shift 2
	for _ in $(seq 300); do
		(($(running "$namespace" "$@") == count)) && return
		sleep 0.2
	done
}

# pool_node POOL CPUS creates a simulated node <POOL>-pool of that many
# CPUs, labelled and tainted muster.dev/demo-pool=POOL, for one part alone.
pool_node() {
	kubectl create -f - >/dev/null <<NODE
apiVersion: v1
kind: Node
metadata:
  name: $1-pool
  labels: {muster.dev/demo-pool: $1, kubernetes.io/hostname: $1-pool}
  annotations: {kwok.x-k8s.io/node: fake}
spec:
  taints: [{key: muster.dev/demo-pool, value: $1, effect: NoSchedule}]
status:
  allocatable: {cpu: "$2", memory: 64Gi, pods: "110"}
  capacity: {cpu: "$2", memory: 64Gi, pods: "110"}
NODE
}

# rack_node NAME RACK CPUS creates a simulated node NAME of that many CPUs
# in the rack (topology.kubernetes.io/rack), of the pool "topology".
rack_node() {
	kubectl create -f - >/dev/null <<NODE
apiVersion: v1
kind: Node
metadata:
  name: $1
  labels: {muster.dev/demo-pool: topology, kubernetes.io/hostname: $1, topology.kubernetes.io/rack: $2}
  annotations: {kwok.x-k8s.io/node: fake}
spec:
  taints: [{key: muster.dev/demo-pool, value: topology, effect: NoSchedule}]
status:
  allocatable: {cpu: "$3", memory: 64Gi, pods: "110"}
  capacity: {cpu: "$3", memory: 64Gi, pods: "110"}
NODE
}

say "Elastic groups sharing idle room, and giving it back to a rigid gang"
kubectl create namespace muster-elastic >/dev/null
pool_node elastic 6
echo "Applying manifests/examples/elastic/sharing.yaml: two elastic groups of 1 to 3 workers, StatefulSets at 1"
kubectl apply --namespace muster-elastic -f "$root/manifests/examples/elastic/sharing.yaml" >/dev/null
wait_running muster-elastic 6 elastic-a elastic-b
if (($(running muster-elastic elastic-a elastic-b) != 6)); then
	echo "the elastic groups did not grow into the node: elastic-a $(running muster-elastic elastic-a), elastic-b $(running muster-elastic elastic-b) workers" >&2
	exit 1
fi
echo "both grew into the node: elastic-a $(running muster-elastic elastic-a), elastic-b $(running muster-elastic elastic-b) workers"
kubectl get statefulsets --namespace muster-elastic -o custom-columns='STATEFULSET:.metadata.name,REPLICAS:.spec.replicas'
echo "Applying manifests/examples/elastic/rigid.yaml: a rigid gang of two, with no room left"
kubectl apply --namespace muster-elastic -f "$root/manifests/examples/elastic/rigid.yaml" >/dev/null
wait_running muster-elastic 2 rigid
kubectl get pods --namespace muster-elastic --sort-by .metadata.name \
	-o custom-columns='POD:.metadata.name,GROUP:.metadata.labels.scheduling\.x-k8s\.io/pod-group,PHASE:.status.phase,NODE:.spec.nodeName'
events muster-elastic '$2 ~ /^Elastic|^GangAdmitted/'
a=$(running muster-elastic elastic-a) b=$(running muster-elastic elastic-b) rigid=$(running muster-elastic rigid)
kubectl delete statefulsets --namespace muster-elastic --all >/dev/null
kubectl delete node elastic-pool >/dev/null
if ((rigid != 2 || a != 2 || b != 2)); then
	echo "the rigid gang has $rigid of 2 pods running, elastic-a $a and elastic-b $b" >&2
	exit 1
fi
echo
echo "muster-controller scaled both StatefulSets up into the idle node; when the"
echo "rigid gang could not reach its min, it scaled each down by one, the most"
echo "fulfilled group first, none below its min, and the gang was admitted whole."

say "A high-priority gang arriving into a full node takes one gang whole"
kubectl create namespace muster-preemption >/dev/null
pool_node preemption 4
kubectl apply -f "$root/manifests/examples/preemption/priorities.yaml" >/dev/null
echo "Applying manifests/examples/preemption/low.yaml: two low-priority gangs of two fill the node"
kubectl apply --namespace muster-preemption -f "$root/manifests/examples/preemption/low.yaml" >/dev/null
wait_running muster-preemption 4 low-a low-b
echo "Applying manifests/examples/preemption/high.yaml: a high-priority gang of two"
kubectl apply --namespace muster-preemption -f "$root/manifests/examples/preemption/high.yaml" >/dev/null
wait_running muster-preemption 2 high
kubectl get pods --namespace muster-preemption --sort-by .metadata.name \
	-o custom-columns='POD:.metadata.name,GROUP:.metadata.labels.scheduling\.x-k8s\.io/pod-group,PRIORITY:.spec.priority,PHASE:.status.phase,NODE:.spec.nodeName'
events muster-preemption '$2 ~ /^Preempt|^GangAdmitted/'
a=$(running muster-preemption low-a) b=$(running muster-preemption low-b) high=$(running muster-preemption high)
kubectl delete node preemption-pool >/dev/null
kubectl delete -f "$root/manifests/examples/preemption/priorities.yaml" >/dev/null
if ((high != 2 || a + b != 2 || a == 1)); then
	echo "the high-priority gang has $high of 2 pods running, low-a $a and low-b $b: want one low gang whole and the other gone whole" >&2
	exit 1
fi
echo
echo "muster-scheduler found that one low-priority gang's room lets the whole"
echo "high-priority gang fit, preempted that gang whole rather than a member of"
echo "each, nominated the high gang's members onto the room, and admitted it."

say "Gangs kept in one rack: a gang, then an MPIJob whose launcher comes late"
kubectl create namespace muster-topology >/dev/null
for node in a0:rack-a a1:rack-a b0:rack-b b1:rack-b b2:rack-b; do
	rack_node "topology-${node%%:*}" "${node#*:}" 4
done
kubectl get nodes --selector muster.dev/demo-pool=topology -L topology.kubernetes.io/rack
echo "Applying manifests/examples/topology/gang.yaml: four 2-CPU pods that must share one rack"
kubectl apply --namespace muster-topology -f "$root/manifests/examples/topology/gang.yaml" >/dev/null
wait_running muster-topology 4 rack-gang
echo "Applying manifests/examples/topology/mpijob.yaml: an MPIJob that must share one rack, its launcher created once its workers are Ready"
kubectl apply --namespace muster-topology -f "$root/manifests/examples/topology/mpijob.yaml" >/dev/null
for _ in $(seq 600); do
	kubectl get pods --namespace muster-topology --selector training.kubeflow.org/job-name=rack-pi,training.kubeflow.org/job-role=launcher \
		-o jsonpath='{.items[*].spec.nodeName}' | grep -q . && break
	sleep 0.2
done
# pods_by_rack SELECTOR prints each pod, its node and the node's rack.
pods_by_rack() {
	kubectl get pods --namespace muster-topology --selector "$1" --sort-by .metadata.name \
		-o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}' |
		while read -r pod node; do
			printf '%-22s %-14s %s\n' "$pod" "${node:-<none>}" "$([[ -n $node ]] && kubectl get node "$node" -o jsonpath='{.metadata.labels.topology\.kubernetes\.io/rack}')"
		done
}
gang=$(pods_by_rack scheduling.x-k8s.io/pod-group=rack-gang) mpi=$(pods_by_rack training.kubeflow.org/job-name=rack-pi)
printf '%-22s %-14s %s\n%s\n%s\n' POD NODE RACK "$gang" "$mpi"
gang_racks=$(awk '{print $3}' <<<"$gang" | sort -u) mpi_racks=$(awk '{print $3}' <<<"$mpi" | sort -u)
events muster-topology '$2 ~ /^Topology|^Gang|^Late/'
kubectl delete namespace muster-topology --wait=false >/dev/null
kubectl delete nodes --selector muster.dev/demo-pool=topology >/dev/null
if [[ $gang_racks != rack-a || $mpi_racks != rack-b ]]; then
	echo "rack-gang ran in [$gang_racks] and rack-pi in [$mpi_racks]: want rack-a, the tightest rack that holds the gang, and rack-b for the whole MPIJob" >&2
	exit 1
fi
echo
echo "muster-scheduler placed the gang whole in rack-a, the tightest rack that"
echo "holds it, and the MPIJob in rack-b, the only rack left with room for its"
echo "workers and its launcher: it held the launcher's room there at admission,"
echo "and bound the launcher into it once mpi-operator created it."

say "GPUs through Dynamic Resource Allocation: an MPIJob whose workers and late launcher each claim one"
kubectl create namespace muster-dra >/dev/null
pool_node gpu 4
"$bin/muster-local" devices --dir "$dir" gpu-pool --count 3
echo "Applying manifests/examples/dra/mpijob.yaml: node gpu-pool has 3 GPUs, for 2 workers and the launcher mpi-operator creates once they are Ready"
kubectl apply --namespace muster-dra -f "$root/manifests/examples/dra/mpijob.yaml" >/dev/null
# bound_role ROLE prints the nodes of gpu-pi's pods of that role.
bound_role() {
	kubectl get pods --namespace muster-dra --selector "training.kubeflow.org/job-name=gpu-pi,training.kubeflow.org/job-role=$1" -o jsonpath='{.items[*].spec.nodeName}'
}
for _ in $(seq 300); do
	[[ $(bound_role worker | wc -w) == 2 ]] && break
	sleep 0.2
done
echo "Applying manifests/examples/dra/gpu-pod.yaml: a pod of no group claiming a GPU, before the launcher exists"
kubectl apply --namespace muster-dra -f "$root/manifests/examples/dra/gpu-pod.yaml" >/dev/null
for _ in $(seq 600); do
	bound_role launcher | grep -q . && break
	sleep 0.2
done
say "The MPIJob's PodGroup, pods and GPUs"
kubectl get podgroups.scheduling.x-k8s.io gpu-pi --namespace muster-dra -o jsonpath='late members: {.metadata.annotations.muster\.dev/late-members}{"\n"}'
kubectl get pods --namespace muster-dra --sort-by .metadata.creationTimestamp \
	-o custom-columns='POD:.metadata.name,CREATED:.metadata.creationTimestamp,BOUND:.status.conditions[?(@.type=="PodScheduled")].lastTransitionTime,READY:.status.conditions[?(@.type=="Ready")].lastTransitionTime,NODE:.spec.nodeName'
kubectl get resourceclaims --namespace muster-dra --sort-by .metadata.creationTimestamp \
	-o custom-columns='CLAIM:.metadata.name,FOR:.status.reservedFor[0].name,GPU:.status.allocation.devices.results[0].device,NODE:.status.allocation.devices.results[0].pool'
echo "notebook: $(kubectl get pod notebook --namespace muster-dra -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].message}')"
launcher=$(kubectl get pods --namespace muster-dra --selector training.kubeflow.org/job-name=gpu-pi,training.kubeflow.org/job-role=launcher -o jsonpath='{.items[0].metadata.name}')
notebook_node=$(kubectl get pod notebook --namespace muster-dra -o jsonpath='{.spec.nodeName}')
if [[ -z $(bound_role launcher) || -n $notebook_node ]]; then
	echo "the launcher was bound to [$(bound_role launcher)] and the notebook to [$notebook_node]: want the launcher bound with the GPU held for it, and the notebook waiting" >&2
	exit 1
fi
bound_after_ready muster-dra "$launcher" gpu-pi-worker-0 gpu-pi-worker-1
kubectl delete namespace muster-dra --wait=false >/dev/null
kubectl delete node gpu-pool >/dev/null
echo
echo "muster-controller read the launcher's GPU from its ResourceClaimTemplate;"
echo "muster-scheduler admitted the workers with the launcher's room and a GPU held,"
echo "kept the notebook off that GPU, and bound the launcher with it once its"
echo "workers were Ready."

say "Kueue in front of muster: two teams' queues, a job waiting for its team's quota"
"$bin/muster-local" kueue --dir "$dir"
kubectl create namespace muster-team-a >/dev/null
kubectl create namespace muster-team-b >/dev/null
pool_node kueue 8
echo "Applying manifests/examples/kueue/queues.yaml: teams a and b, 3 CPUs each, on node kueue-pool (8 CPUs)"
kubectl apply -f "$root/manifests/examples/kueue/queues.yaml" >/dev/null
echo "Applying manifests/examples/kueue/mpijobs.yaml in each team's namespace: jobs first and second"
for _ in $(seq 100); do
	# Kueue registers its webhook handlers a moment after it is ready.
	kubectl apply --namespace muster-team-a -f "$root/manifests/examples/kueue/mpijobs.yaml" >/dev/null 2>&1 && break
	sleep 0.2
done
kubectl apply --namespace muster-team-b -f "$root/manifests/examples/kueue/mpijobs.yaml" >/dev/null
# Team a's pods, as a watch sees each change: the job Kueue admits later
# may finish, and its workers go (cleanPodPolicy: Running), before the
# scene reads when they were Ready.
kubectl get pods --namespace muster-team-a --watch -o json >"$dir/team-a-pods.json" &
team_a_watch=$!
# launcher_of NAMESPACE JOB prints the node of the job's launcher, if bound.
launcher_of() {
	kubectl get pods --namespace "$1" --selector "training.kubeflow.org/job-name=$2,training.kubeflow.org/job-role=launcher" -o jsonpath='{.items[*].spec.nodeName}'
}
for _ in $(seq 300); do
	[[ -n $(launcher_of muster-team-a first) && -n $(launcher_of muster-team-b first) ]] && break
	sleep 0.2
done
say "While each team's first admitted job runs: Kueue's workloads, and the pods that exist"
kubectl get workloads.kueue.x-k8s.io --all-namespaces -o custom-columns='NAMESPACE:.metadata.namespace,WORKLOAD:.metadata.name,QUEUE:.spec.queueName,ADMITTED:.status.conditions[?(@.type=="Admitted")].status'
kubectl get pods --namespace muster-team-a --sort-by .metadata.creationTimestamp \
	-o custom-columns='POD:.metadata.name,ROLE:.metadata.labels.training\.kubeflow\.org/job-role,BOUND:.status.conditions[?(@.type=="PodScheduled")].lastTransitionTime,READY:.status.conditions[?(@.type=="Ready")].lastTransitionTime,NODE:.spec.nodeName'
for _ in $(seq 600); do
	[[ -n $(launcher_of muster-team-a second) && -n $(launcher_of muster-team-b second) ]] && break
	sleep 0.2
done
say "Once team a's jobs have both been admitted, one after the other: job second's pods"
kubectl get pods --namespace muster-team-a --selector training.kubeflow.org/job-name=second --sort-by .metadata.creationTimestamp \
	-o custom-columns='POD:.metadata.name,ROLE:.metadata.labels.training\.kubeflow\.org/job-role,BOUND:.status.conditions[?(@.type=="PodScheduled")].lastTransitionTime,READY:.status.conditions[?(@.type=="Ready")].lastTransitionTime,NODE:.spec.nodeName'
events muster-team-a '$2 ~ /^Admitted|^QuotaReserved|^Pending|^GangAdmitted/'
if [[ -z $(launcher_of muster-team-a second) || -z $(launcher_of muster-team-b second) ]]; then
	echo "the second launchers are bound to [$(launcher_of muster-team-a second)] and [$(launcher_of muster-team-b second)]: want each bound" >&2
	exit 1
fi
# Order by the objects' own times, not by when this script looked. Both
# jobs are created in the same second, so Kueue may admit either first:
# what it promises is one at a time, the other admitted only once the
# first has finished.
# workload_time NAMESPACE JOB CONDITION prints when the job's Kueue
# Workload got the condition.
workload_time() {
	kubectl get workloads.kueue.x-k8s.io --namespace "$1" \
		-o jsonpath="{range .items[?(@.metadata.ownerReferences[0].name==\"$2\")]}{.status.conditions[?(@.type==\"$3\")].lastTransitionTime}{end}"
}
for ns in muster-team-a muster-team-b; do
	earlier=first later=second
	if [[ $(workload_time "$ns" second Admitted) < $(workload_time "$ns" first Admitted) ]]; then
		earlier=second later=first
	fi
	finished=$(workload_time "$ns" $earlier Finished)
	admitted=$(workload_time "$ns" $later Admitted)
	if [[ -z $finished || -z $admitted || $admitted < $finished ]]; then
		echo "in $ns, Kueue admitted job $later at [$admitted], and job $earlier finished at [$finished]: want one job at a time, the second admitted after the first finished" >&2
		exit 1
	fi
	echo "$ns: Kueue admitted job $earlier first; it finished at $finished, and job $later was admitted at $admitted"
	if [[ $ns == muster-team-a ]]; then
		# From the watch: the job's pods may be gone already.
		kill "$team_a_watch"
		wait "$team_a_watch" 2>/dev/null || true
		watched_bound_after_ready "$dir/team-a-pods.json" "$later"
	fi
done
kubectl delete namespace muster-team-a muster-team-b --wait=false >/dev/null
kubectl delete -f "$root/manifests/examples/kueue/queues.yaml" --ignore-not-found --wait=false >/dev/null
echo
echo "Kueue admitted one job per team's quota and kept each team's other job"
echo "suspended, with no pod, until the one it admitted had finished; each admitted job"
echo "was ganged by muster-scheduler, its launcher bound only after its workers"
echo "were Ready, on the node of Kueue's ResourceFlavor."

say "Real nodes: 2 kubelets, each with its own containerd in a network namespace, a pod network, kube-proxy and CoreDNS"
"$bin/muster-local" up --dir "$real_dir" --nodes 0 --real-nodes 2 --example-images muster-example-mpi --manifests "$root/manifests"
kubeconfig=$real_dir/kubeconfig
kubectl get nodes -o wide

say "muster installed with kubectl apply -k manifests/, its images imported, running as pods"
kubectl get pods --namespace muster-system -o wide
kubectl get leases --namespace muster-system

say "Applying manifests/examples/real-nodes/mpi.yaml: mpirun over SSH between pods, with muster's hostfile and keys"
kubectl create namespace muster-real-nodes >/dev/null
kubectl apply --namespace muster-real-nodes -f "$root/manifests/examples/real-nodes/mpi.yaml"
kubectl wait --namespace muster-real-nodes --for=condition=complete job/mpi-allreduce-launcher --timeout=180s
kubectl get pods --namespace muster-real-nodes -o wide --sort-by .metadata.name

say "The launcher's log"
launcher=$(kubectl get pods --namespace muster-real-nodes --selector job-name=mpi-allreduce-launcher -o jsonpath='{.items[0].metadata.name}')
log=$(kubectl logs --namespace muster-real-nodes "$launcher")
echo "$log"
if ! grep -qx 'world size 3, allreduce of ranks 3' <<<"$log"; then
	echo "the launcher did not print: world size 3, allreduce of ranks 3" >&2
	exit 1
fi
workers=$(kubectl get pods --namespace muster-real-nodes --selector muster.dev/role=worker -o jsonpath='{.items[*].metadata.name}')
# shellcheck disable=SC2086 # one argument per worker
bound_after_ready muster-real-nodes "$launcher" $workers
echo
echo "Three ranks ran in real containers on two nodes: the launcher was bound only"
echo "once both workers' sshd listened, resolved them through CoreDNS by the names"
echo "of muster's hostfile, and reached them over SSH with the group's keys."
unset kubeconfig

if [[ ${KEEP:-} == 1 ]]; then
	echo
	echo "The clusters keep running (KEEP=1):"
	echo "  export KUBECONFIG=$dir/kubeconfig   # or $real_dir/kubeconfig, the real nodes"
	echo "  $bin/kubectl get pods -A"
	echo "  $bin/muster-local down --dir $dir"
	echo "  $bin/muster-local down --dir $real_dir"
fi
