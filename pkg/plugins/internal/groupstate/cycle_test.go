package groupstate

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/muster-dev/muster/pkg/topology"
)

// TestACyclesRecordIsReadWhereItWasLeft pins each record a plugin leaves
// in a cycle for the others: found in the cycle it was written to, and
// not in another, nor in no cycle at all.
func TestACyclesRecordIsReadWhereItWasLeft(t *testing.T) {
	searchErr := errors.New("listing nodes: the snapshot is gone")
	tests := []struct {
		name  string
		write func(fwk.CycleState)
		read  func(fwk.CycleState) (any, bool)
		want  any
	}{
		{
			name: "the group the member's gang entered its attempt with",
			write: func(s fwk.CycleState) {
				Record(s, &Cycle{Grouped: true, Key: train, PodGroup: podGroupOf(2), Entered: true})
			},
			read: func(s fwk.CycleState) (any, bool) { c, err := CycleOf(s); return c, err == nil },
			want: &Cycle{Grouped: true, Key: train, PodGroup: podGroupOf(2), Entered: true},
		},
		{
			name: "why the gang's attempt cannot go on",
			write: func(s fwk.CycleState) {
				s.Write(AttemptFailedKey, &AttemptFailed{Reason: "the launcher's room cannot be held"})
			},
			read: func(s fwk.CycleState) (any, bool) { f, ok := AttemptFailedIn(s); return f, ok },
			want: &AttemptFailed{Reason: "the launcher's room cannot be held"},
		},
		{
			name:  "the victims going for the gang",
			write: func(s fwk.CycleState) { s.Write(RoomMadeKey, &RoomMade{At: epoch, Pending: true}) },
			read:  func(s fwk.CycleState) (any, bool) { r, ok := RoomMadeIn(s); return r, ok },
			want:  &RoomMade{At: epoch, Pending: true},
		},
		{
			name:  "a search for victims that failed with an error",
			write: func(s fwk.CycleState) { s.Write(SearchFailedKey, &SearchFailed{Err: searchErr}) },
			read:  func(s fwk.CycleState) (any, bool) { f, ok := SearchFailedIn(s); return f, ok },
			want:  &SearchFailed{Err: searchErr},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			written := framework.NewCycleState()
			tt.write(written)
			got, found := tt.read(written)
			assert.True(t, found)
			assert.Equal(t, tt.want, got)

			_, found = tt.read(framework.NewCycleState())
			assert.False(t, found, "another cycle has none")
			_, found = tt.read(nil)
			assert.False(t, found, "no cycle has none")

			cloned := written.Clone()
			got, found = tt.read(cloned)
			assert.True(t, found, "a clone of the cycle, as preemption's dry runs make, keeps it")
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestKeyInReadsOnlyTheCyclesRecord pins that a step of the cycle reads
// the group Gang's PreFilter recorded, and that with no record it is told
// so rather than deriving the group again.
func TestKeyInReadsOnlyTheCyclesRecord(t *testing.T) {
	tests := []struct {
		name        string
		record      *Cycle
		wantKey     types.NamespacedName
		wantGrouped bool
		wantErr     error
	}{
		{name: "a member reads its group from the record", record: &Cycle{Grouped: true, Key: train, PodGroup: podGroupOf(2)}, wantKey: train, wantGrouped: true},
		{name: "a pod of no group is recorded as such", record: &Cycle{}},
		{name: "a cycle with no record is an error, not a derivation", wantErr: ErrNoCycleRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := framework.NewCycleState()
			if tt.record != nil {
				Record(state, tt.record)
			}
			key, grouped, err := KeyIn(state)
			assert.ErrorIs(t, err, tt.wantErr)
			assert.Equal(t, tt.wantGrouped, grouped)
			assert.Equal(t, tt.wantKey, key)
		})
	}
}

// TestTheRecordsQuorumIsItsPodGroups pins that the record's quorum is the
// one rule's, read from the PodGroup it holds.
func TestTheRecordsQuorumIsItsPodGroups(t *testing.T) {
	c := &Cycle{Grouped: true, Key: train, PodGroup: podGroupOf(3)}
	assert.Equal(t, topology.QuorumOf(podGroupOf(3)), c.Quorum())
	assert.True(t, c.Quorum().ReachedBy(3))
	assert.False(t, c.Quorum().ReachedBy(2))
}

// TestARecordIsReplacedNeverChanged pins that a later record replaces the
// cycle's, as Gang's PreFilter replaces its record once the member entered
// its gang's attempt, and that a clone taken before, as preemption's dry
// runs take, keeps the record it had: a clone shares its records, so none
// is ever changed in place.
func TestARecordIsReplacedNeverChanged(t *testing.T) {
	state := framework.NewCycleState()
	first := &Cycle{Grouped: true, Key: train, PodGroup: podGroupOf(2)}
	Record(state, first)
	before := state.Clone()
	entered := *first
	entered.Entered = true
	Record(state, &entered)

	got, err := CycleOf(state)
	assert.NoError(t, err)
	assert.True(t, got.Entered, "the cycle reads the later record")
	kept, err := CycleOf(before)
	assert.NoError(t, err)
	assert.Same(t, first, kept, "the clone keeps the record it had")
	assert.False(t, kept.Entered)
}
