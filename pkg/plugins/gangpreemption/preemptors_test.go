package gangpreemption

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestPreemptorsAreHeldUntilTheirPreemptionEnds(t *testing.T) {
	solo := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "solo", UID: "solo"}}
	tests := []struct {
		name string
		// answers are running's answers for solo, in turn: at PreEnqueue
		// (one or two), then, if it is held, when a pod is deleted.
		answers []bool
		held    bool
		// activated says whether the pod deleted lets solo in.
		activated bool
	}{
		{name: "no preemption running: not held", answers: []bool{false}, held: false, activated: false},
		{name: "running: held, and let in once it ended", answers: []bool{true, true, false}, held: true, activated: true},
		{name: "running: held, and kept while a victim is still to go", answers: []bool{true, true, true}, held: true, activated: false},
		{name: "the last victim went while it was being held: not held, nothing left to let in", answers: []bool{true, false}, held: false, activated: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asked := 0
			running := func(uid types.UID) bool {
				assert.Equal(t, solo.UID, uid)
				answer := tt.answers[asked]
				asked++
				return answer
			}
			p := newPreemptors()
			assert.Equal(t, tt.held, p.holds(solo, running))
			ended := p.ended(running)
			if tt.activated {
				assert.Equal(t, map[string]*corev1.Pod{"ns/solo": solo}, ended)
				assert.Empty(t, p.ended(running), "let in once only")
				return
			}
			assert.Empty(t, ended)
		})
	}
}
