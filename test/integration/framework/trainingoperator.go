package framework

import (
	"context"
	"sync"
	"time"

	"github.com/muster-dev/muster/pkg/localcluster"
)

// StartTrainingOperator runs training-operator, every job kind of it, in
// the package's cluster once, from the first test that needs it on. It
// waits its turn for the machine's one training-operator certificate
// directory while another package's training-operator holds it.
var StartTrainingOperator = sync.OnceValue(func() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	return Cluster().StartTrainingOperator(ctx, BinDir(), localcluster.TrainingOperatorOptions{})
})
