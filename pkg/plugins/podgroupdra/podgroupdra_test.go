package podgroupdra

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	schedulingv1beta1listers "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	schedulercache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// snapshotHandle is a handle whose snapshot is the one given.
type snapshotHandle struct {
	fwk.Handle
	snapshot fwk.SharedLister
}

func (h snapshotHandle) SnapshotSharedLister() fwk.SharedLister { return h.snapshot }

func informerOf(t *testing.T, podGroups ...*schedulingv1beta1.PodGroup) schedulingv1beta1listers.PodGroupLister {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, pg := range podGroups {
		require.NoError(t, indexer.Add(pg))
	}
	return schedulingv1beta1listers.NewPodGroupLister(indexer)
}

// TestTheSnapshotHoldsTheInformersPodGroups: with GenericWorkload off the
// scheduler's snapshot holds no PodGroup, and DynamicResources could not
// tell which claims are its; the handle DynamicResources is given reads
// them from the informer, and the rest of the snapshot of the cycle.
func TestTheSnapshotHoldsTheInformersPodGroups(t *testing.T) {
	train := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "train", UID: "u"}}
	snapshot := schedulercache.NewSnapshot(nil, []*corev1.Node{st.MakeNode().Name("n1").Obj()})
	_, err := snapshot.PodGroups().Get("team", "train")
	require.Error(t, err, "the scheduler's own snapshot holds PodGroups: the wrapper is not needed")

	handle := withPodGroups(snapshotHandle{snapshot: snapshot}, informerOf(t, train))
	got, err := handle.SnapshotSharedLister().PodGroups().Get("team", "train")
	require.NoError(t, err)
	assert.Equal(t, train, got)
	nodes, err := handle.SnapshotSharedLister().NodeInfos().List()
	require.NoError(t, err)
	assert.Len(t, nodes, 1, "the snapshot's nodes are not the cycle's")

	_, err = handle.SnapshotSharedLister().PodGroups().Get("team", "missing")
	assert.Error(t, err, "a PodGroup the informer lacks was found")
}

// TestArgsAreDefaultedAsKubeSchedulersAre: no args give DynamicResources'
// defaults; args given are read as DynamicResourcesArgs.
func TestArgsAreDefaultedAsKubeSchedulersAre(t *testing.T) {
	args, err := decodeArgs(nil)
	require.NoError(t, err)
	require.NotNil(t, args.FilterTimeout, "the filter timeout kube-scheduler defaults is unset")
	assert.Equal(t, 10*time.Second, args.FilterTimeout.Duration)

	args, err = decodeArgs(&runtime.Unknown{Raw: []byte(`{"filterTimeout":"3s"}`), ContentType: runtime.ContentTypeJSON})
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, args.FilterTimeout.Duration)

	_, err = decodeArgs(&runtime.Unknown{Raw: []byte(`{"filterTimeout":3}`), ContentType: runtime.ContentTypeJSON})
	assert.ErrorContains(t, err, Name+" args")
}
