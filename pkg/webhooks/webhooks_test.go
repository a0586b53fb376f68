package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/topology"
)

func scheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha1.AddToScheme(s))
	return s
}

func podGroup(name string, minMember int32, annotations map[string]string) *v1alpha1.PodGroup {
	return &v1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: "uid-" + "name", Annotations: annotations},
		Spec:       v1alpha1.PodGroupSpec{MinMember: minMember},
	}
}

func request(t testing.TB, op admissionv1.Operation, obj, old runtime.Object) admission.Request {
	t.Helper()
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Namespace: "team-a", Object: runtime.RawExtension{Raw: raw}}}
	if old != nil {
		oldRaw, err := json.Marshal(old)
		require.NoError(t, err)
		req.OldObject = runtime.RawExtension{Raw: oldRaw}
	}
	return req
}

// patched applies the response's patch to the pod, as the API server would.
func patched(t *testing.T, pod *corev1.Pod, resp admission.Response) *corev1.Pod {
	t.Helper()
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	ops, err := json.Marshal(resp.Patches)
	require.NoError(t, err)
	patch, err := jsonpatch.DecodePatch(ops)
	require.NoError(t, err)
	doc, err := patch.Apply(raw)
	require.NoError(t, err)
	out := &corev1.Pod{}
	require.NoError(t, json.Unmarshal(doc, out))
	return out
}

func podWebhook(t *testing.T, c client.Client) *admission.Webhook {
	return admission.WithCustomDefaulter(scheme(t), &corev1.Pod{}, &PodDefaulter{Client: c, Reader: c, ClusterDomain: "cluster.local"})
}

func TestPodDefaulter(t *testing.T) {
	mpi := map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2"}
	objects := []client.Object{
		podGroup("mpi", 3, mpi),
		podGroup("gang", 3, nil),
		podGroup("cyclic", 2, map[string]string{topology.RolesAnnotation: "a=1,b=1", topology.LaunchOrderAnnotation: "a>b>a"}),
		terminating(podGroup("going", 1, nil)),
		&schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "upstream-gang"},
			Spec:       schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}}},
		},
		&schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "upstream-mpi", Annotations: mpi},
			Spec:       schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}}},
		},
		&schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "upstream-shared", Annotations: mpi},
			Spec: schedulingv1beta1.PodGroupSpec{
				SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}},
				ResourceClaims:   []schedulingv1beta1.PodGroupResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("eight-gpus")}},
			},
		},
		&schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "upstream-basic"},
			Spec:       schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}},
		},
	}
	member := func(group string) *st.PodWrapper {
		return st.MakePod().Namespace("team-a").Name("p").Label(topology.GroupLabel, group).Container("trainer:1")
	}
	upstreamMember := func(group string) *st.PodWrapper {
		return st.MakePod().Namespace("team-a").Name("p").PodGroupName(group).Container("trainer:1")
	}
	existing := []client.Object{
		member("mpi").Name("mpi-worker-0").Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, "0").Obj(),
		member("mpi").Name("old-launcher").Label(topology.RoleLabel, "launcher").Label(topology.IndexLabel, "0").Phase(corev1.PodFailed).Obj(),
		member("mpi").Name("stale-launcher").Label(topology.RoleLabel, "launcher").Label(topology.IndexLabel, "0").Annotation(topology.BuiltForAnnotation, "uid-earlier").Obj(),
		member("mpi").Name("def-worker-1").SchedulerName(corev1.DefaultSchedulerName).Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, "1").Obj(),
	}
	tests := []struct {
		name        string
		pod         *corev1.Pod
		wantAllowed bool
		wantPatched bool
		wantMessage string
	}{
		{"not grouped", st.MakePod().Namespace("team-a").Name("p").Container("c").Obj(), true, false, ""},
		{"gang only", member("gang").Obj(), true, false, ""},
		{"in a PodGroup being deleted", member("going").Obj(), false, false,
			`metadata.labels[scheduling.x-k8s.io/pod-group]: Invalid value: "going": PodGroup team-a/going is being deleted, so no member joins it`},
		{"no PodGroup yet, no role", member("later").Obj(), true, false, ""},
		{"no PodGroup yet, with a role", member("later").Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, "0").Obj(), false, false, "create the PodGroup before its pods"},
		{"a member, whose role and index only another scheduler's pod holds", member("mpi").Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, "1").Obj(), true, true, ""},
		{"no role", member("mpi").Label(topology.IndexLabel, "0").Obj(), false, false, "metadata.labels[muster.dev/role]: Required value"},
		{"index out of range", member("mpi").Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, "2").Obj(), false, false, "index runs from 0 to 1"},
		{"invalid topology", member("cyclic").Label(topology.RoleLabel, "a").Label(topology.IndexLabel, "0").Obj(), false, false, "the order has a cycle, a>b>a"},
		{"an index taken", member("mpi").Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, "0").Obj(), false, false,
			`metadata.labels[muster.dev/index]: Duplicate value: "worker 0 of group mpi is pod mpi-worker-0 already; give this pod another index, or delete that pod first"`},
		{"in a scheduling.k8s.io gang too", inUpstreamGroup(member("gang").Obj(), "upstream-gang"), false, false,
			`spec.schedulingGroup.podGroupName: Forbidden: the pod is in two gangs: scheduler-plugins PodGroup "gang" by label scheduling.x-k8s.io/pod-group, and scheduling.k8s.io PodGroup "upstream-gang", a gang of 2, here`},
		{"in a basic scheduling.k8s.io PodGroup too, as the Job controller makes", inUpstreamGroup(member("gang").Obj(), "upstream-basic"), true, false, ""},
		{"naming a scheduling.k8s.io PodGroup not made yet", inUpstreamGroup(member("gang").Obj(), "upstream-later"), true, false, ""},
		{"an index taken by a finished pod, and by one built for an earlier PodGroup", member("mpi").Label(topology.RoleLabel, "launcher").Label(topology.IndexLabel, "0").Obj(), true, true, ""},
		{"a member of a scheduling.k8s.io MPI group", upstreamMember("upstream-mpi").Label(topology.RoleLabel, "launcher").Label(topology.IndexLabel, "0").Obj(), true, true, ""},
		{"not at its scheduling.k8s.io PodGroup's priority", upstreamMember("upstream-gang").Priority(1000).Obj(), false, false,
			`spec.priorityClassName: Invalid value: "": the pod's priority 1000 differs from the priority 0 of its PodGroup team-a/upstream-gang`},
		{"with a claim its scheduling.k8s.io PodGroup shares", upstreamMember("upstream-shared").Label(topology.RoleLabel, "launcher").Label(topology.IndexLabel, "0").PodResourceClaims(
			corev1.PodResourceClaim{Name: "scratch", ResourceClaimTemplateName: ptr.To("one-gpu")},
			corev1.PodResourceClaim{Name: "gpus", ResourceClaimTemplateName: ptr.To("eight-gpus")}).Obj(), true, true, ""},
		{"no scheduling.k8s.io PodGroup yet, with a role", upstreamMember("upstream-later").Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, "0").Obj(), false, false,
			`spec.schedulingGroup.podGroupName: Invalid value: "upstream-later": PodGroup team-a/upstream-later does not exist`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(append(objects, existing...)...).Build()
			m := podWebhook(t, c)
			resp := m.Handle(context.Background(), request(t, admissionv1.Create, tt.pod, nil))
			assert.Equal(t, tt.wantAllowed, resp.Allowed, resp.Result)
			assert.Equal(t, tt.wantPatched, len(resp.Patches) > 0)
			if tt.wantMessage != "" {
				assert.Contains(t, string(resp.Result.Reason)+resp.Result.Message, tt.wantMessage)
			}
			if !tt.wantPatched {
				return
			}
			out := patched(t, tt.pod, resp)
			assert.Contains(t, out.Spec.Containers[0].Env, corev1.EnvVar{Name: "OMPI_MCA_orte_default_hostfile", Value: "/etc/mpi/hostfile"})
			group, _ := topology.GroupOf(tt.pod)
			if name := topology.UpstreamGroupName(tt.pod); name != "" {
				assert.Equal(t, topology.UpstreamMemberValue(name), out.Labels[topology.UpstreamMemberLabel], "an upstream member is labelled for its group's Service")
			}
			var pg client.Object = &v1alpha1.PodGroup{}
			if topology.UpstreamGroupName(tt.pod) != "" {
				pg = &schedulingv1beta1.PodGroup{}
			}
			require.NoError(t, c.Get(context.Background(), group, pg))
			assert.Equal(t, string(pg.GetUID()), out.Annotations[topology.BuiltForAnnotation], "the member records the PodGroup it was built for")
			again := m.Handle(context.Background(), request(t, admissionv1.Create, out, nil))
			assert.True(t, again.Allowed)
			assert.Empty(t, again.Patches, "a pod that has its environment is left as it is")
		})
	}
}

// withDomain returns the annotations with the rack required, unless they
// name a domain already.
func withDomain(annotations map[string]string) map[string]string {
	with := maps.Clone(annotations)
	if with == nil {
		with = map[string]string{}
	}
	if _, ok := with[topology.DomainRequiredAnnotation]; !ok {
		with[topology.DomainRequiredAnnotation] = "topology.kubernetes.io/rack"
	}
	return with
}

func TestPodGroupValidator(t *testing.T) {
	tf := map[string]string{topology.FrameworkAnnotation: "tensorflow", topology.RolesAnnotation: "ps=2,worker=3"}
	tfMoreWorkers := map[string]string{topology.FrameworkAnnotation: "tensorflow", topology.RolesAnnotation: "ps=2,worker=4"}
	cyclic := map[string]string{topology.RolesAnnotation: "a=1,b=1", topology.LaunchOrderAnnotation: "a>b>a"}
	derived := map[string]string{topology.FrameworkAnnotation: "pytorch", topology.RolesAnnotation: "master=1,worker=2", topology.DerivedFromAnnotation: "PyTorchJob/job"}
	horovod := map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=4", topology.ElasticAnnotation: "2:4"}
	tests := []struct {
		name        string
		op          admissionv1.Operation
		pg, old     *v1alpha1.PodGroup
		wantAllowed bool
		wantMessage string
	}{
		{"valid", admissionv1.Create, podGroup("job", 5, tf), nil, true, ""},
		{"gang only", admissionv1.Create, podGroup("job", 5, nil), nil, true, ""},
		{"a cycle", admissionv1.Create, podGroup("job", 2, cyclic), nil, false, "the order has a cycle, a>b>a"},
		{"negative replicas", admissionv1.Create, podGroup("job", 1, map[string]string{topology.RolesAnnotation: "worker=-1"}), nil, false,
			`metadata.annotations[muster.dev/roles]: Invalid value: "worker=-1": role worker has replicas "-1"; it must be a positive whole number`},
		{"minMember above the roles", admissionv1.Create, podGroup("job", 6, tf), nil, false, "spec.minMember: Invalid value: 6"},
		{"same topology, new minMember", admissionv1.Update, podGroup("job", 4, tf), podGroup("job", 5, tf), true, ""},
		{"a changed topology", admissionv1.Update, podGroup("job", 5, tfMoreWorkers), podGroup("job", 5, tf), false,
			"metadata.annotations[muster.dev/roles]: Forbidden: the topology cannot change once set"},
		{"fixing an invalid stored topology", admissionv1.Update, podGroup("job", 2, map[string]string{topology.RolesAnnotation: "a=1,b=1"}), podGroup("job", 2, cyclic), true, ""},
		{"a name that cannot name a Service", admissionv1.Create, podGroup("1job", 5, tf), nil, false, `metadata.name: Invalid value: "1job"`},
		{"a hostname over 63 characters", admissionv1.Create, podGroup(strings.Repeat("j", 60), 5, tf), nil, false, "over the limit of 63"},
		{"too many members", admissionv1.Create, podGroup("job", 1, map[string]string{topology.FrameworkAnnotation: "tensorflow", topology.RolesAnnotation: "ps=1,worker=99999"}), nil, false,
			"100000 members make each member's environment"},
		{"an elastic group admitted at its min", admissionv1.Create, podGroup("job", 3, horovod), nil, true, ""},
		{"an elastic group whose minMember is not its min", admissionv1.Create, podGroup("job", 5, horovod), nil, false,
			"spec.minMember: Invalid value: 5: an elastic group is admitted at its min: 2 of role worker and every member of the other roles, 3 in all; set minMember to 3"},
		{"a negative schedule timeout", admissionv1.Create, withSpec(podGroup("job", 5, tf), func(s *v1alpha1.PodGroupSpec) { s.ScheduleTimeoutSeconds = ptr.To[int32](-5) }), nil, false,
			"spec.scheduleTimeoutSeconds: Invalid value: -5: must be between 0 and 900"},
		{"a schedule timeout of 0, the default mpi-operator writes", admissionv1.Create, withSpec(podGroup("job", 5, tf), func(s *v1alpha1.PodGroupSpec) { s.ScheduleTimeoutSeconds = ptr.To[int32](0) }), nil, true, ""},
		{"a schedule timeout the scheduler would cut", admissionv1.Create, withSpec(podGroup("job", 5, tf), func(s *v1alpha1.PodGroupSpec) { s.ScheduleTimeoutSeconds = ptr.To[int32](100000) }), nil, false,
			"spec.scheduleTimeoutSeconds: Invalid value: 100000: must be between 0 and 900"},
		{"minResources no minMember members could use", admissionv1.Create, withSpec(podGroup("job", 5, tf), func(s *v1alpha1.PodGroupSpec) {
			s.MinResources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000000")}
		}), nil, false, "spec.minResources[cpu]: Invalid value: \"1M\": 5 members use at most 20480 CPUs"},
		{"a misspelt annotation", admissionv1.Create, podGroup("job", 1, map[string]string{"muster.dev/framwork": "mpi"}), nil, false, "did you mean muster.dev/framework?"},
		{"a topology derived from the owner, given to a PodGroup with none", admissionv1.Update, podGroup("job", 3, derived), podGroup("job", 3, nil), true, ""},
		{"a derived topology does not replace one set", admissionv1.Update, podGroup("job", 3, derived), podGroup("job", 3, map[string]string{topology.FrameworkAnnotation: "pytorch", topology.RolesAnnotation: "master=1,worker=1"}), false,
			"the topology cannot change once set"},
		{"a derived group is not checked for the names muster would make", admissionv1.Create, podGroup("1job", 3, derived), nil, true, ""},
		{"a topology derived for a PodGroup its job gave a required domain", admissionv1.Update,
			podGroup("job", 3, withDomain(derived)), podGroup("job", 3, withDomain(nil)), true, ""},
		{"a required domain that is no label key", admissionv1.Create, podGroup("job", 3, withDomain(map[string]string{topology.DomainRequiredAnnotation: "a rack"})), nil, false,
			`metadata.annotations[muster.dev/topology-required]: Invalid value: "a rack": must be a node label key`},
		{"a required domain changed", admissionv1.Update, podGroup("job", 3, withDomain(tf)),
			podGroup("job", 3, map[string]string{topology.FrameworkAnnotation: "tensorflow", topology.RolesAnnotation: "ps=2,worker=3", topology.DomainRequiredAnnotation: "topology.kubernetes.io/zone"}), false,
			"metadata.annotations[muster.dev/topology-required]: Forbidden: the topology cannot change once set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var old runtime.Object
			if tt.old != nil {
				old = tt.old
			}
			checkValidation(t, admission.WithCustomValidator(scheme(t), &v1alpha1.PodGroup{}, PodGroupValidator{}), tt.op, tt.pg, old, tt.wantAllowed, tt.wantMessage)
		})
	}
}

// checkValidation sends obj (and old, for an update) to the validating
// webhook v, and checks its answer.
func checkValidation(t *testing.T, v *admission.Webhook, op admissionv1.Operation, obj, old runtime.Object, wantAllowed bool, wantMessage string) {
	t.Helper()
	resp := v.Handle(context.Background(), request(t, op, obj, old))
	assert.Equal(t, wantAllowed, resp.Allowed, resp.Result)
	if wantMessage != "" {
		assert.Contains(t, resp.Result.Message, wantMessage)
	}
}

func TestUpstreamPodGroupValidator(t *testing.T) {
	upstream := func(name string, gang int32, annotations map[string]string) *schedulingv1beta1.PodGroup {
		pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, Annotations: annotations}}
		if gang > 0 {
			pg.Spec.SchedulingPolicy.Gang = &schedulingv1beta1.GangSchedulingPolicy{MinCount: gang}
		} else {
			pg.Spec.SchedulingPolicy.Basic = &schedulingv1beta1.BasicSchedulingPolicy{}
		}
		return pg
	}
	mpi := map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=2"}
	elastic := map[string]string{topology.RolesAnnotation: "worker=4", topology.ElasticAnnotation: "2:4"}
	const rack, block = "topology.kubernetes.io/rack", "topology.kubernetes.io/block"
	inRack := func(pg *schedulingv1beta1.PodGroup) *schedulingv1beta1.PodGroup {
		pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: rack}}}
		return pg
	}
	tests := []struct {
		name        string
		op          admissionv1.Operation
		pg, old     *schedulingv1beta1.PodGroup
		wantAllowed bool
		wantMessage string
	}{
		{"a valid gang", admissionv1.Create, upstream("job", 3, mpi), nil, true, ""},
		{"a basic policy with roles", admissionv1.Create, upstream("job", 0, mpi), nil, true, ""},
		{"minCount above the roles", admissionv1.Create, upstream("job", 4, mpi), nil, false,
			"spec.schedulingPolicy.gang.minCount: Invalid value: 4: muster.dev/roles names 3 pods in all, so a gang of 4 would never start; lower minCount or add replicas"},
		{"an elastic gang", admissionv1.Create, upstream("job", 2, elastic), nil, true, ""},
		{"elastic on a basic policy", admissionv1.Create, upstream("job", 0, elastic), nil, false,
			"metadata.annotations[muster.dev/elastic]: Forbidden: needs a gang, and this PodGroup's policy is basic; set spec.schedulingPolicy.gang, or remove the annotation"},
		{"a changed topology", admissionv1.Update, upstream("job", 3, map[string]string{topology.FrameworkAnnotation: "mpi", topology.RolesAnnotation: "launcher=1,worker=3"}), upstream("job", 3, mpi), false,
			"the topology cannot change once set"},
		{"a domain annotation agreeing with the spec", admissionv1.Create, inRack(upstream("job", 2, map[string]string{topology.DomainRequiredAnnotation: rack})), nil, true, ""},
		{"a domain annotation disagreeing with the spec", admissionv1.Create, inRack(upstream("job", 2, map[string]string{topology.DomainRequiredAnnotation: block})), nil, false,
			`metadata.annotations[muster.dev/topology-required]: Invalid value: "topology.kubernetes.io/block": disagrees with spec.schedulingConstraints.topology[0].key, topology.kubernetes.io/rack, which muster reads; remove the annotation`},
		{"an invalid domain annotation beside the spec", admissionv1.Create, inRack(upstream("job", 2, map[string]string{topology.DomainRequiredAnnotation: "bad key!"})), nil, false,
			`metadata.annotations[muster.dev/topology-required]: Invalid value: "bad key!": disagrees with spec.schedulingConstraints.topology[0].key`},
		{"an invalid domain annotation alone", admissionv1.Create, upstream("job", 2, map[string]string{topology.DomainRequiredAnnotation: "bad key!"}), nil, false,
			`metadata.annotations[muster.dev/topology-required]: Invalid value: "bad key!": must be a node label key`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var old runtime.Object
			if tt.old != nil {
				old = tt.old
			}
			checkValidation(t, admission.WithCustomValidator(scheme(t), &schedulingv1beta1.PodGroup{}, UpstreamPodGroupValidator{}), tt.op, tt.pg, old, tt.wantAllowed, tt.wantMessage)
		})
	}
}

func TestPodUpdateValidator(t *testing.T) {
	pod := func() *st.PodWrapper {
		return st.MakePod().Namespace("team-a").Name("p").Label(topology.GroupLabel, "job").Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, "0")
	}
	upstream := func() *st.PodWrapper {
		return st.MakePod().Namespace("team-a").Name("p").PodGroupName("job").Label(topology.UpstreamMemberLabel, "job").
			Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, "0")
	}
	plain := st.MakePod().Namespace("team-a").Name("p").Obj()
	tests := []struct {
		name        string
		old, pod    *corev1.Pod
		wantMessage string
	}{
		{"another label", pod().Obj(), pod().Label("team", "a").Obj(), ""},
		{"a pod outside any group", plain, st.MakePod().Namespace("team-a").Name("p").Label("team", "a").Obj(), ""},
		{"labelled into a group", plain, pod().Obj(), "metadata.labels[scheduling.x-k8s.io/pod-group]: Forbidden: a pod joins a group only when it is created"},
		{"moved to another group", pod().Obj(), pod().Label(topology.GroupLabel, "other").Obj(), "a pod stays in the group it was created in (job)"},
		{"taken out of its group", pod().Obj(), st.MakePod().Namespace("team-a").Name("p").Obj(), "a pod stays in the group it was created in"},
		{"a new role", pod().Obj(), pod().Label(topology.RoleLabel, "ps").Obj(), `metadata.labels[muster.dev/role]: Forbidden: a member keeps the role it was created with ("worker")`},
		{"a new index", pod().Obj(), pod().Label(topology.IndexLabel, "1").Obj(), "metadata.labels[muster.dev/index]: Forbidden: a member keeps the index"},
		{"an upstream member's other label", upstream().Obj(), upstream().Label("team", "a").Obj(), ""},
		{"an upstream member's label taken away", upstream().Obj(), func() *corev1.Pod {
			pod := upstream().Obj()
			delete(pod.Labels, topology.UpstreamMemberLabel)
			return pod
		}(), "metadata.labels[muster.dev/upstream-pod-group]: Forbidden"},
		{"an upstream member's label changed", upstream().Obj(), upstream().Label(topology.UpstreamMemberLabel, "other").Obj(),
			"metadata.labels[muster.dev/upstream-pod-group]: Forbidden: muster gave this member the label muster.dev/upstream-pod-group=job"},
		{"an upstream member's new role", upstream().Obj(), upstream().Label(topology.RoleLabel, "ps").Obj(), `a member keeps the role it was created with ("worker")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := admission.WithCustomValidator(scheme(t), &corev1.Pod{}, PodUpdateValidator{})
			resp := v.Handle(context.Background(), request(t, admissionv1.Update, tt.pod, tt.old))
			assert.Equal(t, tt.wantMessage == "", resp.Allowed, resp.Result)
			if tt.wantMessage != "" {
				assert.Contains(t, resp.Result.Message, tt.wantMessage)
			}
		})
	}
}

func TestPodDefaulterAddsNothingToAnOperatorsMembers(t *testing.T) {
	derived := podGroup("pt", 3, map[string]string{topology.FrameworkAnnotation: "pytorch", topology.RolesAnnotation: "master=1,worker=2", topology.DerivedFromAnnotation: "PyTorchJob/pt"})
	awaiting := podGroup("tf", 2, nil)
	awaiting.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "TFJob", Name: "tf", UID: "tf-uid", Controller: ptr.To(true)}}
	c := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(derived, awaiting).Build()
	for group, want := range map[string]string{"pt": "nothing: the group's members are PyTorchJob/pt's", "tf": "nothing: the group's topology is being read from TFJob/tf"} {
		pod := st.MakePod().Namespace("team-a").Name(group+"-worker-0").Label(topology.GroupLabel, group).
			Label(topology.KubeflowRoleLabel, "Worker").Label(topology.KubeflowIndexLabel, "0").Container("trainer:1").Obj()
		pod.Spec.Hostname = group + "-worker-0"
		resp := podWebhook(t, c).Handle(context.Background(), request(t, admissionv1.Create, pod, nil))
		require.True(t, resp.Allowed, resp.Result)
		out := patched(t, pod, resp)
		assert.Equal(t, want, out.Annotations[AddedAnnotation])
		assert.Equal(t, pod.Spec, out.Spec, "the operator's pod spec is left as it is")
	}
}

func TestPodDefaulterGroupsTheJobSetsPods(t *testing.T) {
	s := scheme(t)
	s.AddKnownTypeWithName(topology.JobSetGVK, &unstructured.Unstructured{})
	s.AddKnownTypeWithName(topology.JobSetGVK.GroupVersion().WithKind(topology.JobSetKind+"List"), &unstructured.UnstructuredList{})
	jobSet := func(name string, annotations map[string]string, dependsOn string) *unstructured.Unstructured {
		js := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicatedJobs": []any{
			map[string]any{"name": "workers", "replicas": int64(2)},
			map[string]any{"name": "launcher", "dependsOn": []any{map[string]any{"name": "workers", "status": dependsOn}}},
		}}}}
		js.SetGroupVersionKind(topology.JobSetGVK)
		js.SetNamespace("team-a")
		js.SetName(name)
		js.SetAnnotations(annotations)
		return js
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		jobSet("js", nil, "Ready"),
		jobSet("opted-out", map[string]string{topology.JobSetPodGroupAnnotation: "none"}, "Ready"),
		jobSet("initialized", nil, "Complete"),
		podGroup("own", 3, nil),
		&schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "upstream"},
			Spec:       schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}}},
		},
	).Build()
	m := admission.WithCustomDefaulter(s, &corev1.Pod{}, &PodDefaulter{Client: c, Reader: c, ClusterDomain: "cluster.local"})
	pod := func(jobSet string) *st.PodWrapper {
		return st.MakePod().Namespace("team-a").Name(jobSet+"-workers-0-0").Label(topology.JobSetNameLabel, jobSet).
			Label(topology.JobSetReplicatedJobLabel, "workers").Container("trainer:1")
	}
	tests := []struct {
		name, wantGroup string
		pod             *corev1.Pod
	}{
		{"a JobSet's pod joins the group named after it", "js", pod("js").Obj()},
		{"a JobSet that opts out", "", pod("opted-out").Obj()},
		{"a JobSet's initializer, which its workers wait for to complete", "", pod("initialized").Obj()},
		{"a JobSet's pod that waits for its initializer", "initialized",
			pod("initialized").Name("initialized-launcher-0-0").Label(topology.JobSetReplicatedJobLabel, "launcher").Obj()},
		{"a JobSet that does not exist any more", "", pod("gone").Obj()},
		{"a pod that names a group already", "own", pod("js").Label(topology.GroupLabel, "own").Obj()},
		{"a pod that names a scheduling.k8s.io PodGroup", "", pod("js").PodGroupName("upstream").Obj()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := m.Handle(context.Background(), request(t, admissionv1.Create, tt.pod, nil))
			require.True(t, resp.Allowed, resp.Result)
			got := tt.pod
			if len(resp.Patches) > 0 {
				got = patched(t, tt.pod, resp)
			}
			assert.Equal(t, tt.wantGroup, got.Labels[topology.GroupLabel])
			if tt.wantGroup == "js" || tt.wantGroup == "initialized" {
				assert.Equal(t, "the group label scheduling.x-k8s.io/pod-group: the group's members are JobSet/"+tt.wantGroup+"'s", got.Annotations[AddedAnnotation])
				assert.Empty(t, got.Spec.Hostname, "JobSet's members get nothing else of muster's")
			}
		})
	}
}

func TestPodDefaulterGroupsAKueuePodGroupsPods(t *testing.T) {
	s := scheme(t)
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		podGroup("own", 3, nil),
		&schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "upstream"},
			Spec:       schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}}},
		},
	).Build()
	m := admission.WithCustomDefaulter(s, &corev1.Pod{}, &PodDefaulter{Client: c, Reader: c, ClusterDomain: "cluster.local"})
	pod := func() *st.PodWrapper {
		return st.MakePod().Namespace("team-a").Name("p-0").Label(topology.KueuePodGroupLabel, "train").
			Annotation(topology.KueuePodGroupTotalAnnotation, "3").Container("trainer:1")
	}
	tests := []struct {
		name, wantGroup string
		pod             *corev1.Pod
	}{
		{"a pod of a Kueue pod group joins the group of its name", "train", pod().Obj()},
		{"a pod that names a group already", "own", pod().Label(topology.GroupLabel, "own").Obj()},
		{"a pod that names a scheduling.k8s.io PodGroup", "", pod().PodGroupName("upstream").Obj()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := m.Handle(context.Background(), request(t, admissionv1.Create, tt.pod, nil))
			require.True(t, resp.Allowed, resp.Result)
			got := tt.pod
			if len(resp.Patches) > 0 {
				got = patched(t, tt.pod, resp)
			}
			assert.Equal(t, tt.wantGroup, got.Labels[topology.GroupLabel])
			if tt.wantGroup == "train" {
				assert.Equal(t, "the group label scheduling.x-k8s.io/pod-group: the group's members are Kueue pod group train's (kueue.x-k8s.io/pod-group-name)", got.Annotations[AddedAnnotation])
				assert.Empty(t, got.Spec.Hostname, "a Kueue pod group's members get nothing else of muster's")
			}
		})
	}
}

func TestPodDefaulterTakesATrainJobsInitializerOutOfItsGroup(t *testing.T) {
	s := scheme(t)
	s.AddKnownTypeWithName(topology.JobSetGVK, &unstructured.Unstructured{})
	s.AddKnownTypeWithName(topology.JobSetGVK.GroupVersion().WithKind(topology.JobSetKind+"List"), &unstructured.UnstructuredList{})
	trainJob := metav1.OwnerReference{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: topology.TrainJobKind, Name: "tj", UID: "tj-uid", Controller: ptr.To(true)}
	js := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicatedJobs": []any{
		map[string]any{"name": "dataset-initializer"},
		map[string]any{"name": "node", "replicas": int64(2), "dependsOn": []any{map[string]any{"name": "dataset-initializer", "status": "Complete"}}},
	}}}}
	js.SetGroupVersionKind(topology.JobSetGVK)
	js.SetNamespace("team-a")
	js.SetName("tj")
	js.SetOwnerReferences([]metav1.OwnerReference{trainJob})
	pg := podGroup("tj", 3, nil)
	pg.OwnerReferences = []metav1.OwnerReference{trainJob}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(js, pg).Build()
	m := admission.WithCustomDefaulter(s, &corev1.Pod{}, &PodDefaulter{Client: c, Reader: c, ClusterDomain: "cluster.local"})
	pod := func(rjob string) *corev1.Pod {
		return st.MakePod().Namespace("team-a").Name("tj-"+rjob+"-0-0").Label(topology.JobSetNameLabel, "tj").
			Label(topology.JobSetReplicatedJobLabel, rjob).Label(topology.GroupLabel, "tj").Container("trainer:1").Obj()
	}
	tests := []struct {
		rjob, wantGroup, wantAdded string
	}{
		{"dataset-initializer", "", "nothing, and removed the group label scheduling.x-k8s.io/pod-group: replicated job dataset-initializer runs, and finishes, before the rest of TrainJob/tj starts, so it is not part of the gang"},
		{"node", "tj", "nothing: the group's topology is being read from TrainJob/tj"},
	}
	for _, tt := range tests {
		t.Run(tt.rjob, func(t *testing.T) {
			resp := m.Handle(context.Background(), request(t, admissionv1.Create, pod(tt.rjob), nil))
			require.True(t, resp.Allowed, resp.Result)
			got := patched(t, pod(tt.rjob), resp)
			assert.Equal(t, tt.wantGroup, got.Labels[topology.GroupLabel])
			assert.Equal(t, tt.wantAdded, got.Annotations[AddedAnnotation])
			assert.Equal(t, pod(tt.rjob).Spec, got.Spec, "Trainer's pod spec is left as it is")
		})
	}
}

func TestPodDefaulterRefusesAJobSetsPodInAGroupThatDoesNotNameIt(t *testing.T) {
	s := scheme(t)
	s.AddKnownTypeWithName(topology.JobSetGVK, &unstructured.Unstructured{})
	js := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicatedJobs": []any{map[string]any{"name": "worker"}}}}}
	js.SetGroupVersionKind(topology.JobSetGVK)
	js.SetNamespace("team-a")
	js.SetName("js")
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(js,
		podGroup("plain", 2, map[string]string{topology.RolesAnnotation: "worker=2"}),
		podGroup("other", 2, map[string]string{topology.RolesAnnotation: "worker=2", topology.JobSetAnnotation: "another"}),
	).Build()
	m := admission.WithCustomDefaulter(s, &corev1.Pod{}, &PodDefaulter{Client: c, Reader: c, ClusterDomain: "cluster.local"})
	for group, want := range map[string]string{
		"plain": "the pod is JobSet js's, which names its pods itself; set the annotation muster.dev/jobset: js on PodGroup team-a/plain",
		"other": "PodGroup team-a/other's members are the pods of JobSet another (muster.dev/jobset); put only that JobSet's pods into it",
	} {
		pod := st.MakePod().Namespace("team-a").Name("js-worker-0-0").Label(topology.GroupLabel, group).Label(topology.JobSetNameLabel, "js").
			Label(topology.JobSetReplicatedJobLabel, "worker").Label(topology.JobSetJobIndexLabel, "0").Label(topology.JobSetReplicasLabel, "1").
			Annotation(topology.JobCompletionIndex, "0").Container("trainer:1").Obj()
		resp := m.Handle(context.Background(), request(t, admissionv1.Create, pod, nil))
		assert.False(t, resp.Allowed, group)
		assert.Contains(t, resp.Result.Message, want, group)
	}
}

func TestDuplicateOfNumbersAJobSetsPodsAcrossItsJobs(t *testing.T) {
	topo, errs := topology.Parse(map[string]string{topology.FrameworkAnnotation: "pytorch", topology.RolesAnnotation: "master=1,worker=4"})
	require.Empty(t, errs)
	worker := func(name, job, completion string) *corev1.Pod {
		return st.MakePod().Namespace("team-a").Name(name).Label(topology.GroupLabel, "train").
			Label(topology.JobSetReplicatedJobLabel, "worker").Label(topology.JobSetJobIndexLabel, job).Label(topology.JobSetReplicasLabel, "2").
			Annotation(topology.JobCompletionIndex, completion).Obj()
	}
	created := worker("pt-worker-0-1", "0", "1")
	member, errs := topo.Identify(created)
	require.Empty(t, errs)
	require.Equal(t, int32(1), member.Index)
	assert.Empty(t, duplicateOf(created, member, []corev1.Pod{*worker("pt-worker-1-1", "1", "1")}, topo),
		"Job 1's pod 1 is worker 3, not worker 1")
	assert.NotEmpty(t, duplicateOf(created, member, []corev1.Pod{*worker("pt-worker-0-1-again", "0", "1")}, topo))
}

// A running container's environment cannot follow an elastic group, so a
// member's MUSTER_WORKER_* name the workers there are as it is created:
// the active ones, itself, and those its owner is creating with it.
func TestAnElasticMembersEnvNamesTheWorkersThereAreAsItIsCreated(t *testing.T) {
	elastic := podGroup("job", 2, map[string]string{topology.RolesAnnotation: "worker=4", topology.ElasticAnnotation: "2:4"})
	// The fake client serves a scale only as a typed object; the API
	// server's, read here as unstructured, says 3.
	setScaledTo3 := interceptor.Funcs{SubResourceGet: func(ctx context.Context, c client.Client, sub string, obj, scale client.Object, opts ...client.SubResourceGetOption) error {
		if sub != "scale" || obj.GetName() != "job-worker" {
			return c.SubResource(sub).Get(ctx, obj, scale, opts...)
		}
		return unstructured.SetNestedField(scale.(*unstructured.Unstructured).Object, int64(3), "spec", "replicas")
	}}
	worker := func(index string) *st.PodWrapper {
		return st.MakePod().Namespace("team-a").Name("job-worker-"+index).Label(topology.GroupLabel, "job").
			Label(topology.RoleLabel, "worker").Label(topology.IndexLabel, index).Container("trainer:1")
	}
	ownedBySet := func(w *st.PodWrapper) *corev1.Pod {
		return w.OwnerReference("job-worker", appsv1.SchemeGroupVersion.WithKind("StatefulSet")).Obj()
	}
	tests := []struct {
		name      string
		existing  []client.Object
		pod       *corev1.Pod
		wantHosts []string
	}{
		{"a bare pod, beside worker 0 and a finished worker 3", []client.Object{worker("0").Obj(), worker("3").Phase(corev1.PodSucceeded).Obj()},
			worker("1").Obj(), []string{"job-worker-0", "job-worker-1"}},
		{"worker 2 of a StatefulSet scaled to 3, before its siblings are seen", nil,
			ownedBySet(worker("2")), []string{"job-worker-0", "job-worker-1", "job-worker-2"}},
		{"worker 0 of a StatefulSet scaled to 3", nil,
			ownedBySet(worker("0")), []string{"job-worker-0", "job-worker-1", "job-worker-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(append(tt.existing, elastic)...).WithInterceptorFuncs(setScaledTo3).Build()
			resp := podWebhook(t, c).Handle(context.Background(), request(t, admissionv1.Create, tt.pod, nil))
			require.True(t, resp.Allowed, resp.Result)
			env := map[string]string{}
			for _, e := range patched(t, tt.pod, resp).Spec.Containers[0].Env {
				env[e.Name] = e.Value
			}
			var want []string
			for _, host := range tt.wantHosts {
				want = append(want, host+".job.team-a.svc")
			}
			assert.Equal(t, strings.Join(want, ","), env["MUSTER_WORKER_HOSTS"])
			assert.Equal(t, fmt.Sprint(len(want)), env["MUSTER_WORKER_NUM"])
		})
	}
}

// TestAMemberOfALongNamedUpstreamPodGroupIsLabelled: the Job controller
// names a Job's PodGroup from the Job's name twice, past the 63
// characters of a label value; its members are labelled all the same,
// with the one shortened value.
func TestAMemberOfALongNamedUpstreamPodGroupIsLabelled(t *testing.T) {
	name := "distributed-training-run-7db8b58bb-distributed-training-run-pgt-0-5fdcb7f699"
	gang := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
		Spec:       schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}}},
	}
	m := podWebhook(t, fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(gang).Build())
	for _, pod := range []string{"train-0", "train-1"} {
		member := inUpstreamGroup(st.MakePod().Namespace("team-a").Name(pod).Container("trainer:1").Obj(), name)
		resp := m.Handle(context.Background(), request(t, admissionv1.Create, member, nil))
		require.True(t, resp.Allowed, resp.Result)
		out := patched(t, member, resp)
		assert.Equal(t, "distributed-training-run-7db8b_e10c44e86f6ef94c4a753a9b30dfd60e", out.Labels[topology.UpstreamMemberLabel], "pod %s", pod)
	}
}

func terminating(pg *v1alpha1.PodGroup) *v1alpha1.PodGroup {
	pg.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	pg.Finalizers = []string{"team-a/keep"}
	return pg
}

func inUpstreamGroup(pod *corev1.Pod, name string) *corev1.Pod {
	pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &name}
	return pod
}

// withSpec is the PodGroup with its spec changed.
func withSpec(pg *v1alpha1.PodGroup, change func(*v1alpha1.PodGroupSpec)) *v1alpha1.PodGroup {
	change(&pg.Spec)
	return pg
}
