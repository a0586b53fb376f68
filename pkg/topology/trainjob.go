package topology

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TrainJobKind is Kubeflow Trainer's job. Trainer runs each TrainJob as a
// JobSet of the same name, built from the job's runtime, and with a
// coscheduling PodGroup policy makes a PodGroup of the same name too.
const TrainJobKind = "TrainJob"

// TrainJobGVK is the TrainJob API muster reads.
var TrainJobGVK = schema.GroupVersionKind{Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: TrainJobKind}

// isTrainJob reports whether an owner reference's API version and kind are
// a TrainJob's.
func isTrainJob(apiVersion, kind string) bool {
	return groupOf(apiVersion) == TrainJobGVK.Group && kind == TrainJobKind
}

// TrainJobRuntime returns the kind and name of the runtime a TrainJob runs
// with (spec.runtimeRef): a ClusterTrainingRuntime unless it names a
// TrainingRuntime, as Trainer defaults it.
func TrainJobRuntime(trainJob *unstructured.Unstructured) (schema.GroupVersionKind, string, error) {
	name, _, _ := unstructured.NestedString(trainJob.Object, "spec", "runtimeRef", "name")
	if name == "" {
		return schema.GroupVersionKind{}, "", fmt.Errorf("TrainJob %s names no runtime in spec.runtimeRef.name", trainJob.GetName())
	}
	kind, _, _ := unstructured.NestedString(trainJob.Object, "spec", "runtimeRef", "kind")
	if kind == "" {
		kind = "ClusterTrainingRuntime"
	}
	if kind != "ClusterTrainingRuntime" && kind != "TrainingRuntime" {
		return schema.GroupVersionKind{}, "", fmt.Errorf("TrainJob %s names a runtime of kind %q in spec.runtimeRef.kind; muster reads ClusterTrainingRuntime and TrainingRuntime", trainJob.GetName(), kind)
	}
	return TrainJobGVK.GroupVersion().WithKind(kind), name, nil
}

// FrameworkOfRuntime is the framework a Trainer runtime's ML policy names:
// torch is PyTorch's, mpi is MPI's, and any other is generic.
func FrameworkOfRuntime(runtime *unstructured.Unstructured) Framework {
	policy, _, _ := unstructured.NestedMap(runtime.Object, "spec", "mlPolicy")
	switch {
	case policy["torch"] != nil:
		return PyTorch
	case policy["mpi"] != nil:
		return MPI
	}
	return Generic
}

// FromTrainJob reads the group of a TrainJob's pods from the JobSet Trainer
// runs it as, which must be the TrainJob's own, and the framework of its
// runtime. Its roles, launch order, late members and the replicated jobs
// left out of the gang (the initializers) are the JobSet's; see
// FromJobSet.
func FromTrainJob(trainJob, jobSet *unstructured.Unstructured, framework Framework) (JobSetGroup, error) {
	owner := metav1.GetControllerOfNoCopy(jobSet)
	if owner == nil || owner.UID != trainJob.GetUID() {
		return JobSetGroup{}, fmt.Errorf("JobSet %s is not TrainJob %s's", jobSet.GetName(), trainJob.GetName())
	}
	group, err := FromJobSet(jobSet)
	if err != nil {
		return JobSetGroup{}, err
	}
	group.Annotations[FrameworkAnnotation] = string(framework)
	group.Annotations[DerivedFromAnnotation] = TrainJobKind + "/" + trainJob.GetName()
	if _, errs := Parse(group.Annotations); len(errs) > 0 {
		return JobSetGroup{}, fmt.Errorf("TrainJob %s makes no topology muster can serve: %w", trainJob.GetName(), errs.ToAggregate())
	}
	return group, nil
}
