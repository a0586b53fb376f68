package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/muster-dev/muster/pkg/topology"
	"github.com/muster-dev/muster/test/integration/framework"
)

// twins is how many pods of the same role and index the burst creates.
const twins = 6

// TestABurstOfTwinsRunsOne: pods of the same role and index created in the
// same instant can all pass the pod webhook, which reads the members stored
// before each; muster-scheduler binds one of them and tells the others why
// they wait.
func TestABurstOfTwinsRunsOne(t *testing.T) {
	ctx := context.Background()
	ns := framework.NewNamespace(t)
	framework.NodePool(t, ns, 2, "4")
	framework.CreatePodGroup(t, ns, "d", 2, map[string]string{topology.RolesAnnotation: "worker=2"})
	pod := func(name string, index int) *corev1.Pod {
		p := member(ns, "d", "worker", index).Name(name).Obj()
		return framework.InPool(p, ns)
	}
	create(t, pod("d-worker-1", 1))

	var wg sync.WaitGroup
	var mu sync.Mutex
	var created []string
	start := make(chan struct{})
	for i := range twins {
		wg.Go(func() {
			<-start
			name := fmt.Sprintf("d-worker-0-%d", i)
			if _, err := framework.Client.CoreV1().Pods(ns).Create(ctx, pod(name, 0), metav1.CreateOptions{}); err == nil {
				mu.Lock()
				created = append(created, name)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if len(created) == 0 {
		t.Fatal("the webhook refused every twin: none holds worker 0")
	}
	t.Logf("%d of %d twins passed the webhook", len(created), twins)

	framework.WaitForPod(t, ns, "d-worker-1", "bound with one worker 0", framework.IsBound)
	bound := func() []string {
		list, err := framework.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for i := range list.Items {
			if p := &list.Items[i]; p.Name != "d-worker-1" && framework.IsBound(p) {
				names = append(names, p.Name)
			}
		}
		return names
	}
	// The gang's two members are allowed together and bound each in its
	// own binding cycle: worker 1 may show bound a moment before its twin.
	framework.Eventually(t, "a twin of worker 0 bound", func(context.Context) ([]string, error) {
		if got := bound(); len(got) == 0 {
			return nil, fmt.Errorf("none bound")
		}
		return nil, nil
	})
	if got := bound(); len(got) != 1 {
		t.Fatalf("bound twins of worker 0: %v, want exactly one", got)
	}
	// Every other twin that was created was tried and told, once, why it
	// waits: the twin that held worker 0 when it was first tried. None was
	// bound meanwhile.
	holder := bound()[0]
	for _, name := range created {
		if name == holder {
			continue
		}
		note := framework.WaitForEvent(t, ns, name, "DuplicateMember")
		if want := " has the same role (worker) and index in group d and holds them"; !strings.HasPrefix(note, "pod d-worker-0-") || !strings.Contains(note, want) {
			t.Errorf("%s was told %q, want it to name the twin holding worker 0", name, note)
		}
	}
	if got := bound(); len(got) != 1 {
		t.Errorf("bound twins of worker 0: %v, want exactly one", got)
	}
}
