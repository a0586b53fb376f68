package localcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// What mpi-operator expects: the namespace of its leader election lease,
// and its health port, which it always binds on every address; so two of
// it cannot run on one machine at once.
const (
	mpiOperatorLockNamespace = "mpi-operator"
	mpiOperatorHealth        = "http://127.0.0.1:8080/healthz"
)

// StartMPIOperator runs mpi-operator from binDir as its users run it with
// muster, --gang-scheduling=muster-scheduler, with its MPIJob v2beta1 CRD
// installed. Its CRD has the name of training-operator's MPIJob v1: a
// cluster runs one or the other.
func (c *Cluster) StartMPIOperator(ctx context.Context, binDir string) error {
	config, err := c.RESTConfig()
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mpiOperatorLockNamespace}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, namespace, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", mpiOperatorLockNamespace, err)
	}
	return c.StartOperator(ctx, binDir, Operator{
		Name:           "mpi-operator",
		KubeconfigFlag: "-kubeConfig",
		Args: []string{
			// Any name but volcano means scheduler-plugins' PodGroups.
			"--gang-scheduling=" + SchedulerName,
			"--lock-namespace=" + mpiOperatorLockNamespace,
		},
		Health: mpiOperatorHealth,
	})
}
