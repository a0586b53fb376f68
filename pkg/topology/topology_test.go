package topology

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseDefaults(t *testing.T) {
	tests := []struct {
		name          string
		annotations   map[string]string
		wantPreds     map[string][]string
		wantPort      int32
		wantFramework Framework
	}{
		{
			name:          "mpi: workers before the launcher",
			annotations:   map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=4"},
			wantPreds:     map[string][]string{"launcher": {"worker"}},
			wantPort:      22,
			wantFramework: MPI,
		},
		{
			name:          "tensorflow: ps before chief, workers and evaluator",
			annotations:   map[string]string{FrameworkAnnotation: "tensorflow", RolesAnnotation: "ps=2,chief=1,worker=3,evaluator=1"},
			wantPreds:     map[string][]string{"chief": {"ps"}, "worker": {"ps"}, "evaluator": {"ps"}},
			wantPort:      2222,
			wantFramework: TensorFlow,
		},
		{
			name:          "tensorflow without ps has no order",
			annotations:   map[string]string{FrameworkAnnotation: "tensorflow", RolesAnnotation: "chief=1,worker=3"},
			wantPreds:     map[string][]string{},
			wantPort:      2222,
			wantFramework: TensorFlow,
		},
		{
			name:          "mxnet: the three-stage chain",
			annotations:   map[string]string{FrameworkAnnotation: "mxnet", RolesAnnotation: "scheduler=1,server=2,worker=2"},
			wantPreds:     map[string][]string{"server": {"scheduler"}, "worker": {"server"}},
			wantPort:      9091,
			wantFramework: MXNet,
		},
		{
			name:          "mxnet without servers: the chain closes over the gap",
			annotations:   map[string]string{FrameworkAnnotation: "mxnet", RolesAnnotation: "scheduler=1,worker=2"},
			wantPreds:     map[string][]string{"worker": {"scheduler"}},
			wantPort:      9091,
			wantFramework: MXNet,
		},
		{
			name:          "pytorch: master before workers",
			annotations:   map[string]string{FrameworkAnnotation: "pytorch", RolesAnnotation: "master=1,worker=2"},
			wantPreds:     map[string][]string{"worker": {"master"}},
			wantPort:      23456,
			wantFramework: PyTorch,
		},
		{
			name:          "generic: no roles needed, no order",
			annotations:   nil,
			wantPreds:     map[string][]string{},
			wantFramework: Generic,
		},
		{
			name:          "an explicit order replaces the default",
			annotations:   map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=4", LaunchOrderAnnotation: "launcher>worker"},
			wantPreds:     map[string][]string{"worker": {"launcher"}},
			wantPort:      22,
			wantFramework: MPI,
		},
		{
			name:          "none turns ordering off",
			annotations:   map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=4", LaunchOrderAnnotation: "none"},
			wantPreds:     map[string][]string{},
			wantPort:      22,
			wantFramework: MPI,
		},
		{
			name:          "several chains",
			annotations:   map[string]string{RolesAnnotation: "a=1,b=1,c=1,d=1", LaunchOrderAnnotation: "a>b>c, a>d"},
			wantPreds:     map[string][]string{"b": {"a"}, "c": {"b"}, "d": {"a"}},
			wantFramework: Generic,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo, errs := Parse(tt.annotations)
			require.Empty(t, errs)
			assert.Equal(t, tt.wantFramework, topo.Framework)
			assert.Equal(t, tt.wantPort, topo.Port)
			assert.Equal(t, StartAfterReady, topo.StartAfter)
			got := map[string][]string{}
			for _, role := range topo.Roles {
				if preds := topo.Predecessors(role); len(preds) > 0 {
					got[role] = preds
				}
			}
			assert.Equal(t, tt.wantPreds, got)
		})
	}
}

func TestParseOptions(t *testing.T) {
	topo, errs := Parse(map[string]string{
		FrameworkAnnotation:    "pytorch",
		RolesAnnotation:        "master=1,worker=4",
		StartAfterAnnotation:   "Scheduled",
		PortAnnotation:         "29500",
		NProcPerNodeAnnotation: "8",
		ElasticAnnotation:      "2:4",
	})
	require.Empty(t, errs)
	assert.Equal(t, StartAfterScheduled, topo.StartAfter)
	assert.Equal(t, int32(29500), topo.Port)
	assert.Equal(t, "8", topo.NProcPerNode)
	assert.Equal(t, &Range{Min: 2, Max: 4}, topo.Elastic)
	assert.Equal(t, []string{"master", "worker"}, topo.Roles)
	assert.Equal(t, map[string]int32{"master": 1, "worker": 4}, topo.Replicas)

	topo, errs = Parse(map[string]string{
		FrameworkAnnotation:         "mpi",
		RolesAnnotation:             "launcher=1,worker=2",
		MPIImplementationAnnotation: "mpich",
		SlotsAnnotation:             "2",
	})
	require.Empty(t, errs)
	assert.Equal(t, "mpich", topo.MPIImplementation)
	assert.Equal(t, int32(2), topo.Slots)
}

func TestParseTopologyDomains(t *testing.T) {
	topo, errs := Parse(map[string]string{DomainRequiredAnnotation: BlockLabel, DomainPreferredAnnotation: RackLabel})
	require.Empty(t, errs)
	assert.Equal(t, BlockLabel, topo.DomainKey)
	assert.Equal(t, RackLabel, topo.PreferredDomainKey)

	topo, errs = Parse(map[string]string{DomainPreferredAnnotation: "example.com/nvlink-clique"})
	require.Empty(t, errs, "a preference alone, of a label muster does not know")
	assert.Empty(t, topo.DomainKey)
	assert.Equal(t, "example.com/nvlink-clique", topo.PreferredDomainKey)
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        []string
	}{
		{
			name:        "a cycle",
			annotations: map[string]string{RolesAnnotation: "a=1,b=1,c=1", LaunchOrderAnnotation: "a>b>c>a"},
			want:        []string{`metadata.annotations[muster.dev/launch-order]: Invalid value: "a>b>c>a": the order has a cycle, a>b>c>a`},
		},
		{
			name:        "a cycle across chains",
			annotations: map[string]string{RolesAnnotation: "a=1,b=1", LaunchOrderAnnotation: "a>b,b>a"},
			want:        []string{"the order has a cycle, a>b>a"},
		},
		{
			name:        "an unknown role in the order",
			annotations: map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=2", LaunchOrderAnnotation: "workers>launcher"},
			want:        []string{`names role "workers", which muster.dev/roles does not list`},
		},
		{
			name:        "a bad count",
			annotations: map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=zero"},
			want:        []string{`role worker has replicas "zero"; it must be a positive whole number`},
		},
		{
			name:        "a count past a whole number's range",
			annotations: map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=9223372036854775807"},
			want:        []string{`role worker has 9223372036854775807 replicas, more than the 2147483647 a role may have`},
		},
		{
			name:        "a misspelled launcher, which the default order would lose",
			annotations: map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "lancher=1,worker=2"},
			want:        []string{`metadata.annotations[muster.dev/roles]: Invalid value: "lancher": role "lancher" is not one of mpi's, and its launch order waits for a role "launcher" the group lacks; rename the role launcher, or set muster.dev/launch-order (none for no order)`},
		},
		{
			name:        "a negative late request",
			annotations: map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=2", LateMembersAnnotation: `{"launcher":{"requests":{"cpu":"-5"}}}`},
			want:        []string{`role launcher requests -5 of cpu; a request is never negative`},
		},
		{
			name:        "an absurd late request",
			annotations: map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=2", LateMembersAnnotation: `{"launcher":{"requests":{"cpu":"100000"}}}`},
			want:        []string{`metadata.annotations[muster.dev/late-members]: Invalid value: "{\"launcher\":{\"requests\":{\"cpu\":\"100000\"}}}": role launcher requests 100k CPUs, more than the 4096 any node has`},
		},
		{
			name:        "late memory no node has",
			annotations: map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=2", LateMembersAnnotation: `{"launcher":{"requests":{"memory":"100Ei"}}}`},
			want:        []string{`of memory, more than the 64Ti any node has: its room could never be held`},
		},
		{
			name:        "a late extended resource in part",
			annotations: map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=2", LateMembersAnnotation: `{"launcher":{"requests":{"nvidia.com/gpu":"1.5"}}}`},
			want:        []string{`role launcher requests 1500m of nvidia.com/gpu; an extended resource is counted in whole units: request a whole number`},
		},
		{
			name:        "a late node selector key no label has",
			annotations: map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=2", LateMembersAnnotation: `{"launcher":{"requests":{"cpu":"1"},"nodeSelector":{"bad key!":"x"}}}`},
			want:        []string{`role launcher has nodeSelector "bad key!": "x", which no node label can match`},
		},
		{
			name:        "a late node affinity operator the API server refuses",
			annotations: map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=2", LateMembersAnnotation: `{"launcher":{"requests":{"cpu":"1"},"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"pool","operator":"Foo","values":["a"]}]}]}}}}`},
			want:        []string{`role launcher has a required nodeAffinity the API server would refuse in its pod`},
		},
		{
			name:        "a late toleration operator the API server refuses",
			annotations: map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=2", LateMembersAnnotation: `{"launcher":{"requests":{"cpu":"1"},"tolerations":[{"key":"gpu","operator":"Bogus"}]}}`},
			want:        []string{`role launcher has tolerations[0] with operator "Bogus"; use Equal or Exists`},
		},
		{
			name:        "late devices of no valid class, and of no count",
			annotations: map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=2", LateMembersAnnotation: `{"launcher":{"requests":{"cpu":"1"},"devices":[{"deviceClassName":"GPU_A100","count":1},{"deviceClassName":"gpu.example.com"}]}}`},
			want: []string{
				`role launcher, devices[0].deviceClassName "GPU_A100" must name a DeviceClass: a lowercase RFC 1123 subdomain`,
				`role launcher, devices[1].count is 0; write how many devices of the class one pod claims, 1 to 32`,
			},
		},
		{
			name:        "late devices of one class twice, and more than a claim is allocated",
			annotations: map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=2", LateMembersAnnotation: `{"launcher":{"requests":{"cpu":"1"},"devices":[{"deviceClassName":"gpu.example.com","count":1},{"deviceClassName":"gpu.example.com","count":33}]}}`},
			want: []string{
				`role launcher, devices[1].count is 33; write how many devices of the class one pod claims, 1 to 32`,
				`role launcher names device class gpu.example.com twice; write its devices once, with their count`,
			},
		},
		{
			name:        "a zero count",
			annotations: map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=0"},
			want:        []string{`role launcher has replicas "0"`},
		},
		{
			name:        "an unknown framework",
			annotations: map[string]string{FrameworkAnnotation: "jax"},
			want:        []string{`metadata.annotations[muster.dev/framework]: Unsupported value: "jax": supported values: "tensorflow", "pytorch", "mpi", "mxnet", "generic"`},
		},
		{
			name:        "roles missing for a framework",
			annotations: map[string]string{FrameworkAnnotation: "tensorflow"},
			want:        []string{"metadata.annotations[muster.dev/roles]: Required value: framework tensorflow needs its roles and replicas, for example ps=2,worker=3"},
		},
		{
			name: "every problem at once",
			annotations: map[string]string{
				FrameworkAnnotation: "pytorch", RolesAnnotation: "master=1,Worker=2", StartAfterAnnotation: "ready",
				PortAnnotation: "70000", ElasticAnnotation: "4:2", NProcPerNodeAnnotation: "many",
			},
			want: []string{
				`role "Worker" must be a DNS label`,
				`muster.dev/start-after]: Unsupported value: "ready"`,
				"must be a port number from 1 to 65535",
				`must be "auto" or a positive number`,
				"must be min:max nodes with 1 <= min <= max",
			},
		},
		{
			name:        "too many roles",
			annotations: map[string]string{RolesAnnotation: strings.TrimSuffix(strings.Repeat("r=1,", MaxRoles+1), ",")},
			want:        []string{"metadata.annotations[muster.dev/roles]: Too many: 33: must have at most 32 items"},
		},
		{
			name:        "a misspelt annotation",
			annotations: map[string]string{"muster.dev/framwork": "mpi"},
			want:        []string{`metadata.annotations[muster.dev/framwork]: Invalid value: "mpi": muster has no such annotation; did you mean muster.dev/framework?`},
		},
		{
			name:        "elastic on TensorFlow",
			annotations: map[string]string{FrameworkAnnotation: "tensorflow", RolesAnnotation: "ps=1,worker=2", ElasticAnnotation: "1:2"},
			want: []string{"metadata.annotations[muster.dev/elastic]: Forbidden: framework tensorflow does not read it, only pytorch, mpi, generic; remove it" +
				" (TF_CONFIG and MXNet's DMLC_NUM_WORKER name the whole cluster once, when a member starts, so members that come and go would leave the others with a wrong one)"},
		},
		{
			name:        "an elastic role not listed at its max",
			annotations: map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=2", ElasticAnnotation: "1:3"},
			want: []string{`metadata.annotations[muster.dev/elastic]: Invalid value: "1:3": an elastic group grows and shrinks its role worker between min and max, ` +
				"so muster.dev/roles lists it at max: set worker=3 there, or the max to 2"},
		},
		{
			name:        "a port on MPI",
			annotations: map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=2", PortAnnotation: "2022"},
			want:        []string{"metadata.annotations[muster.dev/port]: Forbidden: framework mpi does not read it"},
		},
		{
			name:        "slots on TensorFlow",
			annotations: map[string]string{FrameworkAnnotation: "tensorflow", RolesAnnotation: "worker=2", SlotsAnnotation: "2"},
			want:        []string{"metadata.annotations[muster.dev/slots]: Forbidden: framework tensorflow does not read it, only mpi"},
		},
		{
			name:        "PyTorch without a master",
			annotations: map[string]string{FrameworkAnnotation: "pytorch", RolesAnnotation: "trainer=2"},
			want:        []string{`metadata.annotations[muster.dev/roles]: Invalid value: "trainer": PyTorch needs a master`},
		},
		{
			name:        "TensorFlow with a master and a chief",
			annotations: map[string]string{FrameworkAnnotation: "tensorflow", RolesAnnotation: "master=1,chief=1,worker=1"},
			want:        []string{"keep only one of master and chief"},
		},
		{
			name:        "MXNet without a scheduler",
			annotations: map[string]string{FrameworkAnnotation: "mxnet", RolesAnnotation: "server=1,worker=2"},
			want:        []string{"add scheduler=1"},
		},
		{
			name:        "a topology domain that is no label key",
			annotations: map[string]string{DomainRequiredAnnotation: "rack/of/nodes"},
			want:        []string{`metadata.annotations[muster.dev/topology-required]: Invalid value: "rack/of/nodes": must be a node label key, such as topology.kubernetes.io/rack: `},
		},
		{
			name:        "a preferred domain that is the required one",
			annotations: map[string]string{DomainRequiredAnnotation: RackLabel, DomainPreferredAnnotation: RackLabel},
			want:        []string{`metadata.annotations[muster.dev/topology-preferred]: Invalid value: "topology.kubernetes.io/rack": must be finer than muster.dev/topology-required, topology.kubernetes.io/rack`},
		},
		{
			name:        "a preferred domain coarser than the required one",
			annotations: map[string]string{DomainRequiredAnnotation: RackLabel, DomainPreferredAnnotation: BlockLabel},
			want:        []string{`metadata.annotations[muster.dev/topology-preferred]: Invalid value: "topology.kubernetes.io/block": must be finer than muster.dev/topology-required`},
		},
		{
			name:        "a preferred domain that is no label key",
			annotations: map[string]string{DomainPreferredAnnotation: "a rack"},
			want:        []string{`metadata.annotations[muster.dev/topology-preferred]: Invalid value: "a rack": must be a node label key`},
		},
		{
			name:        "late members in the form of a bare resource list",
			annotations: map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=2", LateMembersAnnotation: `{"launcher":{"cpu":"1"}}`},
			want:        []string{`metadata.annotations[muster.dev/late-members]: Invalid value: "{\"launcher\":{\"cpu\":\"1\"}}": must be JSON of the roles created late and what one pod of each requests, and where it may run, for example {"launcher":{"requests":{"cpu":"1"}`},
		},
		{
			name:        "a late member of a role the group does not have",
			annotations: map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=2", LateMembersAnnotation: `{"driver":{"requests":{"cpu":"1"}}}`},
			want:        []string{`names role "driver", which muster.dev/roles does not list`},
		},
		{
			name:        "MPI without workers",
			annotations: map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1"},
			want:        []string{"add worker=N"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := Parse(tt.annotations)
			require.Len(t, errs, len(tt.want), "errors: %v", errs)
			for i, want := range tt.want {
				assert.Contains(t, errs[i].Error(), want)
			}
		})
	}
}

// FuzzParse checks that any annotations parse without panicking, and that a
// topology without errors is sound: its order names only its roles and has
// no cycle. The seed corpus is in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add("mpi", "launcher=1,worker=4", "", "")
	f.Add("tensorflow", "ps=2,chief=1,worker=3", "ps>chief,ps>worker", "Running")
	f.Add("generic", "a=1,b=1", "a>b>a", "Ready")
	f.Fuzz(func(t *testing.T, framework, roles, order, startAfter string) {
		annotations := map[string]string{}
		for k, v := range map[string]string{FrameworkAnnotation: framework, RolesAnnotation: roles, LaunchOrderAnnotation: order, StartAfterAnnotation: startAfter} {
			if v != "" {
				annotations[k] = v
			}
		}
		topo, errs := Parse(annotations)
		if len(errs) > 0 {
			for _, err := range errs {
				if !strings.HasPrefix(err.Field, "metadata.annotations[muster.dev/") {
					t.Fatalf("error %v does not name its annotation", err)
				}
			}
			return
		}
		for _, role := range topo.Roles {
			if topo.Replicas[role] < 1 {
				t.Fatalf("role %s has %d replicas", role, topo.Replicas[role])
			}
			for _, pred := range topo.Predecessors(role) {
				if _, ok := topo.Replicas[pred]; !ok {
					t.Fatalf("role %s waits for unknown role %s", role, pred)
				}
			}
		}
		if cycle := topo.cycle(); cycle != nil {
			t.Fatalf("accepted a cyclic order %v", cycle)
		}
	})
}

func TestElasticGroup(t *testing.T) {
	topo, errs := Parse(map[string]string{FrameworkAnnotation: "mpi", RolesAnnotation: "launcher=1,worker=4", ElasticAnnotation: "2:4"})
	require.Empty(t, errs, "Horovod elastic reads discover_hosts.sh")
	assert.Equal(t, int32(3), topo.ElasticMinMember(), "min workers and the launcher")
	assert.Equal(t, 0.0, topo.Elastic.Fulfillment(2))
	assert.Equal(t, 0.5, topo.Elastic.Fulfillment(3))
	assert.Equal(t, 1.0, topo.Elastic.Fulfillment(4))
	assert.Equal(t, 1.0, Range{Min: 3, Max: 3}.Fulfillment(3), "a range of one size is always fulfilled")

	_, errs = Parse(map[string]string{RolesAnnotation: "worker=3", ElasticAnnotation: "1:3"})
	assert.Empty(t, errs, "a generic group may be elastic")
}
