package localcluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
)

// What mpi-operator expects: the namespace of its leader election lease,
// and its health port, which it always binds on every address, with no
// flag to move it. So two of it cannot run on one machine at once: the
// cluster that runs one holds mpiOperatorLock, and the others wait for it.
const (
	mpiOperatorLockNamespace = "mpi-operator"
	mpiOperatorHealthPort    = 8080
	mpiOperatorLock          = "/tmp/muster-mpi-operator.lock"
)

// StartMPIOperator runs mpi-operator from binDir as its users run it with
// muster, --gang-scheduling=muster-scheduler, with its MPIJob v2beta1 CRD
// installed. Its CRD has the name of training-operator's MPIJob v1: a
// cluster runs one or the other. It may be run again after a failure.
func (c *Cluster) StartMPIOperator(ctx context.Context, binDir string) error {
	if err := c.holdLock(ctx, mpiOperatorLock); err != nil {
		return err
	}
	// The health check must not be answered by another program on the
	// port: this one would have died, unseen, failing to bind it.
	if err := portFree(mpiOperatorHealthPort); err != nil {
		return fmt.Errorf("mpi-operator always serves its health check on port %d, and another program on this machine holds it: %w", mpiOperatorHealthPort, err)
	}
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
		Health: "http://127.0.0.1:" + strconv.Itoa(mpiOperatorHealthPort) + "/healthz",
	})
}

// portFree reports an error when the TCP port is taken on any address.
func portFree(port int) error {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return err
	}
	return l.Close()
}
