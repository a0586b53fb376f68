package operators

import (
	"context"
	"sync"
	"time"

	"github.com/muster-dev/muster/test/integration/framework"
)

// startTrainingOperator starts training-operator once for the package.
var startTrainingOperator = sync.OnceValue(func() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return framework.Cluster().StartTrainingOperator(ctx, framework.BinDir())
})
