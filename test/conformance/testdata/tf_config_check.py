"""Checks TF_CONFIG values the way TensorFlow reads them.

No TensorFlow package exists here, so this encodes the rules TensorFlow 2.x
applies when a job starts from TF_CONFIG:

- TFConfigClusterResolver: TF_CONFIG is a JSON object; "cluster" maps each
  job name to a list of "host:port" addresses (a ClusterSpec); "task" has a
  string "type" and an integer "index"; "rpc_layer" and "environment" are
  optional strings.
- distribute/multi_worker_util._validate_cluster_spec: job names are among
  chief, worker, evaluator and ps; at most one chief and one evaluator; the
  task's index is below the number of its job's addresses.
- The task is in the cluster, except the evaluator, which runs outside the
  others' cluster: ParameterServerStrategy hangs waiting for an evaluator
  listed there. The evaluator may list itself.
- The coordinator is named "chief": TensorFlow 2 has no "master" job.

Usage: tf_config_check.py NAME=TF_CONFIG ...; exits 1 naming each problem.
"""
import json
import sys

ALLOWED = ("chief", "worker", "evaluator", "ps")


def problems(config_text):
    try:
        config = json.loads(config_text)
    except ValueError as e:
        return [f"not JSON: {e}"]
    found = []
    cluster = config.get("cluster")
    task = config.get("task")
    if not isinstance(cluster, dict) or not cluster:
        return ["cluster is not a non-empty object"]
    if not isinstance(task, dict):
        return ["task is not an object"]
    for job, addresses in cluster.items():
        if job not in ALLOWED:
            found.append(f"job {job!r} is not one of {ALLOWED}")
        if not isinstance(addresses, list) or not addresses:
            found.append(f"job {job!r} has no list of addresses")
            continue
        for address in addresses:
            host, _, port = str(address).rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                found.append(f"{address!r} of job {job!r} is not host:port")
    for job in ("chief", "evaluator"):
        if len(cluster.get(job, [])) > 1:
            found.append(f"there must be at most one {job!r}")
    task_type, index = task.get("type"), task.get("index")
    if not isinstance(task_type, str) or not isinstance(index, int):
        found.append(f"task {task!r} has no string type and integer index")
    elif task_type != "evaluator" and "evaluator" in cluster:
        found.append("the evaluator is listed in the cluster of another task")
    if isinstance(task_type, str) and task_type != "evaluator" and task_type not in cluster:
        found.append(f"task type {task_type!r} is not in the cluster")
    elif isinstance(task_type, str) and isinstance(index, int) and task_type in cluster and not 0 <= index < len(cluster[task_type]):
        found.append(f"task index {index} is out of range for job {task_type!r}")
    if "master" in cluster or task_type == "master":
        found.append("the coordinator is named 'master', not 'chief'")
    for key in ("rpc_layer", "environment"):
        if key in config and not isinstance(config[key], str):
            found.append(f"{key} is not a string")
    return found


def main(args):
    failed = False
    for arg in args:
        name, _, config_text = arg.partition("=")
        found = problems(config_text)
        for problem in found:
            print(f"{name}: {problem}")
        if not found:
            print(f"{name}: ok")
        failed = failed or bool(found)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
