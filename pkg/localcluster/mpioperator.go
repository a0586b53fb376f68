package localcluster

import (
	"context"
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
	if _, err := c.createNamespace(ctx, mpiOperatorLockNamespace); err != nil {
		return err
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
