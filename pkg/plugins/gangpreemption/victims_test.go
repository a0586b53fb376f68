package gangpreemption

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// TestVictimOrder: units are ordered dearest first by moreImportant, which
// is kube-scheduler's MoreImportantVictim where muster has no rule of its
// own.
func TestVictimOrder(t *testing.T) {
	notStarted := func(u *unit) *unit { u.start = nil; return u }
	gang := victim("gang", 1, 0, 3)
	tests := []struct {
		name       string
		dear, less *unit
	}{
		{"a higher priority first", victim("high", 2, 5, 1), victim("low", 1, 0, 4)},
		{"a whole gang before a member above an elastic min, of any size", victim("small", 1, 5, 1), elasticExtra(gang, "extra", 5)},
		{"a group before a pod of no group, as kube-scheduler ranks them", victim("group", 1, 5, 2), victim("pod", 1, 0, 1)},
		{"more pods before fewer", victim("four", 1, 5, 4), victim("two", 1, 0, 2)},
		{"the longest running first", victim("older", 1, 0, 2), victim("younger", 1, 5, 2)},
		{"a unit running before one not started yet (waiting at Permit)", victim("running", 1, 5, 2), notStarted(victim("waiting", 1, 0, 2))},
		{"then by name", victim("a", 1, 0, 2), victim("b", 1, 0, 2)},
		{"an elastic group's lowest index first", elasticExtra(gang, "extra", 3), elasticExtra(gang, "extra", 4)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Negative(t, moreImportant(tt.dear, tt.less))
			assert.Positive(t, moreImportant(tt.less, tt.dear))
			assert.Zero(t, moreImportant(tt.dear, tt.dear))
		})
	}
}

func TestVictimOrderIsATotalOrder(t *testing.T) {
	gang := victim("gang", 1, 0, 3)
	units := []*unit{
		victim("pod", 1, 0, 1), gang, elasticExtra(gang, "x", 4), victim("high", 3, 9, 1),
		elasticExtra(gang, "x", 3), victim("younger", 1, 9, 3), victim("big", 1, 9, 5),
	}
	sorted := slices.Clone(units)
	slices.SortStableFunc(sorted, moreImportant)
	var names []string
	for _, u := range sorted {
		names = append(names, u.name)
	}
	assert.Equal(t, []string{"ns/high", "ns/big", "ns/gang", "ns/younger", "ns/pod", "ns/gang", "ns/gang"}, names)
	assert.Equal(t, int32(3), sorted[5].index, "the lower index is dearer: the highest goes first")
	for i := range sorted {
		for j := range sorted {
			assert.Equal(t, -moreImportant(sorted[i], sorted[j]), moreImportant(sorted[j], sorted[i]), "antisymmetric: %d, %d", i, j)
		}
	}
}

func TestNewUnitIsTheFrameworksVictimOfItsPods(t *testing.T) {
	early := victim("early", 1, 0, 1).pods[0].GetPod()
	late := victim("late", 1, 7, 1).pods[0].GetPod()
	u := newUnit("ns/g", []*corev1.Pod{late, early}, 4, fwk.PodGroupKeyType)
	assert.Equal(t, int32(4), u.Priority())
	assert.Len(t, u.Pods(), 2)
	assert.True(t, u.IsGroup())
	assert.Equal(t, early.Status.StartTime, u.EarliestStartTime(), "the earliest start of its pods")

	// A pod not started yet counts as started now, as kube-scheduler counts
	// it: the youngest.
	pending := st.MakePod().Namespace("ns").Name("p").UID("p").Obj()
	alone := newUnit("ns/p", []*corev1.Pod{pending}, 1, fwk.PodKeyType)
	assert.True(t, alone.EarliestStartTime().After(late.Status.StartTime.Time))
	assert.False(t, alone.IsGroup())
}
