package group

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	schedulingfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"

	"github.com/muster-dev/muster/pkg/gangview"
	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	"github.com/muster-dev/muster/pkg/topology"
)

// TestThePublishedRecordIsWrittenOnlyWhenItChanges: the scheduler's record
// of a gang (held rooms with their expiry, the attempt's domain, the last
// result) is what the model holds, and a write that would change nothing
// is not sent.
func TestThePublishedRecordIsWrittenOnlyWhenItChanges(t *testing.T) {
	expires := time.Date(2026, 12, 6, 12, 1, 0, 0, time.UTC)
	attempted := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	want := gangview.Published{
		HeldRooms:   []gangview.HeldRoom{{Role: "launcher", Node: "node-2", Expires: metav1.NewTime(expires)}},
		Domain:      "rack=r1",
		LastAttempt: &gangview.Attempt{Time: metav1.NewTime(attempted), Admitted: true, Message: "3/3 members placed"},
	}
	encoded, err := json.Marshal(want)
	require.NoError(t, err)
	tests := []struct {
		name      string
		current   string
		wantWrite bool
	}{
		{name: "no record yet: written", wantWrite: true},
		{name: "a stale record: written", current: `{"domain":"rack=r2"}`, wantWrite: true},
		{name: "the same record: not written", current: string(encoded)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := &v1alpha1.PodGroup{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train", UID: "pg-uid", Annotations: map[string]string{topology.DomainRequiredAnnotation: "rack"}},
				Spec:       v1alpha1.PodGroupSpec{MinMember: 3},
			}
			if tt.current != "" {
				pg.Annotations[gangview.PublishedAnnotation] = tt.current
			}
			groups := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			require.NoError(t, groups.Add(pg))
			m := NewModel(groups, cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{IndexName: IndexFunc}), topology.SchedulerName)
			client := schedulingfake.NewSimpleClientset(pg)
			p := newPublisher(m, kubefake.NewSimpleClientset(), client)
			key := types.NamespacedName{Namespace: "ns", Name: "train"}

			m.Rooms().Add(&groupstate.Room{Group: key, Role: "launcher", Node: "node-2"})
			m.Rooms().Expire(key, expires)
			m.Attempts().ChooseDomain(key, groupstate.Domain{Name: "r1"})
			m.Attempts().Record(key, attempted, true, "3/3 members placed")
			assert.Equal(t, want, m.Published(key))

			require.NoError(t, p.write(context.Background(), key))
			if !tt.wantWrite {
				assert.Empty(t, client.Actions())
				return
			}
			require.Len(t, client.Actions(), 1)
			written, err := client.SchedulingV1alpha1().PodGroups("ns").Get(context.Background(), "train", metav1.GetOptions{})
			require.NoError(t, err)
			assert.JSONEq(t, string(encoded), written.Annotations[gangview.PublishedAnnotation])
		})
	}
}

// TestARecordOfNothingIsRemoved: once a gang's rooms are gone and its
// attempt forgotten, its record goes too.
func TestARecordOfNothingIsRemoved(t *testing.T) {
	pg := &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train", UID: "pg-uid", Annotations: map[string]string{gangview.PublishedAnnotation: `{"domain":"rack=r2"}`}},
		Spec:       v1alpha1.PodGroupSpec{MinMember: 3},
	}
	groups := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, groups.Add(pg))
	m := NewModel(groups, cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{IndexName: IndexFunc}), topology.SchedulerName)
	client := schedulingfake.NewSimpleClientset(pg)
	p := newPublisher(m, kubefake.NewSimpleClientset(), client)
	require.NoError(t, p.write(context.Background(), types.NamespacedName{Namespace: "ns", Name: "train"}))
	written, err := client.SchedulingV1alpha1().PodGroups("ns").Get(context.Background(), "train", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, written.Annotations, gangview.PublishedAnnotation)
}
