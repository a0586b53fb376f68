package perf

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/types"

	"github.com/muster-dev/muster/pkg/topology"
)

func TestSummarize(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	group := types.NamespacedName{Namespace: "gangs", Name: "g"}
	mpi, errs := topology.Parse(map[string]string{
		topology.FrameworkAnnotation: "mpi",
		topology.RolesAnnotation:     "launcher=1,worker=2",
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	gangOf2 := map[types.NamespacedName]groupShape{group: {minMember: 2}}

	tests := []struct {
		name   string
		pods   []podTimes
		shapes map[types.NamespacedName]groupShape
		want   summary
	}{
		{
			name: "a gang bound whole is admitted from its quorum's creation to its quorum's binding",
			pods: []podTimes{
				{group: group, created: at(0), bound: at(300)},
				{group: group, created: at(100), bound: at(250)},
				{group: group, created: at(900), bound: at(1000)},
			},
			shapes: gangOf2,
			want:   summary{gangs: 1, admission: []time.Duration{200 * time.Millisecond}, completion: 300 * time.Millisecond},
		},
		{
			name: "a member that finished before the quorum was bound makes the gang partial",
			pods: []podTimes{
				{group: group, created: at(0), bound: at(10), finished: at(500)},
				{group: group, created: at(0), bound: at(900)},
			},
			shapes: gangOf2,
			want:   summary{gangs: 1, admission: []time.Duration{900 * time.Millisecond}, partial: 1, completion: 900 * time.Millisecond},
		},
		{
			name: "members bound without a quorum make the gang partial and it is never admitted",
			pods: []podTimes{
				{group: group, created: at(0), bound: at(10)},
				{group: group, created: at(0)},
			},
			shapes: gangOf2,
			want:   summary{gangs: 1, partial: 1},
		},
		{
			name: "plain pods and pods of an unknown group are not gangs",
			pods: []podTimes{
				{created: at(0), bound: at(10)},
				{group: types.NamespacedName{Namespace: "gangs", Name: "unknown"}, created: at(0), bound: at(10)},
			},
			shapes: gangOf2,
			want:   summary{},
		},
		{
			name: "a launcher bound after every worker was Ready is released from the last Ready",
			pods: []podTimes{
				{group: group, role: "worker", created: at(0), bound: at(10), ready: at(40)},
				{group: group, role: "worker", created: at(0), bound: at(10), ready: at(60)},
				{group: group, role: "launcher", created: at(0), bound: at(75)},
			},
			shapes: map[types.NamespacedName]groupShape{group: {minMember: 3, topology: mpi}},
			want: summary{
				gangs: 1, admission: []time.Duration{75 * time.Millisecond}, completion: 75 * time.Millisecond,
				successors: 1, release: []time.Duration{15 * time.Millisecond},
			},
		},
		{
			name: "a launcher bound before a worker was Ready is early",
			pods: []podTimes{
				{group: group, role: "worker", created: at(0), bound: at(10), ready: at(40)},
				{group: group, role: "worker", created: at(0), bound: at(10), ready: at(90)},
				{group: group, role: "launcher", created: at(0), bound: at(10)},
			},
			shapes: map[types.NamespacedName]groupShape{group: {minMember: 3, topology: mpi}},
			want: summary{
				gangs: 1, admission: []time.Duration{10 * time.Millisecond}, completion: 10 * time.Millisecond,
				successors: 1, early: 1,
			},
		},
		{
			name: "a late launcher waits from the last worker Ready, and its workers idle until it is bound",
			pods: []podTimes{
				{group: group, role: "worker", gpus: 1, created: at(0), bound: at(10), ready: at(40)},
				{group: group, role: "worker", gpus: 1, created: at(0), bound: at(10), ready: at(60)},
				{group: group, role: "launcher", created: at(60), bound: at(100)},
			},
			shapes: map[types.NamespacedName]groupShape{group: {minMember: 3, topology: mpi, lateLauncher: true}},
			want: summary{
				gangs: 1, admission: []time.Duration{40 * time.Millisecond}, completion: 100 * time.Millisecond,
				successors: 1, release: []time.Duration{40 * time.Millisecond},
				lateJobs: 1, launcherWait: []time.Duration{40 * time.Millisecond}, idleGPUSeconds: 0.06 + 0.04,
				jobStart: []time.Duration{100 * time.Millisecond},
			},
		},
		{
			name: "a late launcher never bound leaves its workers idle until the workload ends",
			pods: []podTimes{
				{group: group, role: "worker", gpus: 1, created: at(0), bound: at(10), ready: at(40)},
				{group: group, role: "worker", gpus: 1, created: at(0), bound: at(10), ready: at(60)},
			},
			shapes: map[types.NamespacedName]groupShape{group: {minMember: 2, topology: mpi, lateLauncher: true}},
			want: summary{
				gangs: 1, admission: []time.Duration{10 * time.Millisecond}, completion: 10 * time.Millisecond,
				lateJobs: 1, idleGPUSeconds: 0.96 + 0.94, neverLaunched: 1,
			},
		},
	}
	racks := map[string]string{"a1": "rack-a", "a2": "rack-a", "b1": "rack-b"}
	inOneRack := map[types.NamespacedName]groupShape{group: {minMember: 2, domainOf: racks}}
	tests = append(tests, []struct {
		name   string
		pods   []podTimes
		shapes map[types.NamespacedName]groupShape
		want   summary
	}{
		{
			name: "a gang that must stay in one rack and does",
			pods: []podTimes{
				{group: group, created: at(0), bound: at(100), node: "a1"},
				{group: group, created: at(0), bound: at(100), node: "a2"},
			},
			shapes: inOneRack,
			want:   summary{gangs: 1, admission: []time.Duration{100 * time.Millisecond}, completion: 100 * time.Millisecond, constrained: 1},
		},
		{
			name: "a gang that must stay in one rack and spans two",
			pods: []podTimes{
				{group: group, created: at(0), bound: at(100), node: "a1"},
				{group: group, created: at(0), bound: at(100), node: "b1"},
			},
			shapes: inOneRack,
			want:   summary{gangs: 1, admission: []time.Duration{100 * time.Millisecond}, completion: 100 * time.Millisecond, constrained: 1, spanning: 1},
		},
		{
			name: "a node without the label is a domain of its own",
			pods: []podTimes{
				{group: group, created: at(0), bound: at(100), node: "a1"},
				{group: group, created: at(0), bound: at(100), node: "bare"},
			},
			shapes: inOneRack,
			want:   summary{gangs: 1, admission: []time.Duration{100 * time.Millisecond}, completion: 100 * time.Millisecond, constrained: 1, spanning: 1},
		},
	}...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := summarize(tc.pods, tc.shapes, at(1000))
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(summary{}), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("summarize (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	tests := []struct {
		values []time.Duration
		p      float64
		want   time.Duration
	}{
		{values: nil, p: 50, want: -1},
		{values: ms(5), p: 99, want: 5 * time.Millisecond},
		{values: ms(4, 1, 3, 2), p: 50, want: 2 * time.Millisecond},
		{values: ms(4, 1, 3, 2), p: 99, want: 4 * time.Millisecond},
		{values: ms(10, 20, 30, 40, 50, 60, 70, 80, 90, 100), p: 90, want: 90 * time.Millisecond},
	}
	for _, tc := range tests {
		if got := percentile(tc.values, tc.p); got != tc.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", tc.values, tc.p, got, tc.want)
		}
	}
}
