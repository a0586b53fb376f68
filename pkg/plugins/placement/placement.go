// Package placement implements the Placement scheduler plugin: a gang
// that requires a topology domain (topology.DomainRequiredAnnotation, or
// an upstream PodGroup's schedulingConstraints) has every member on nodes
// that share one value of the domain's node label; one that prefers one
// (topology.DomainPreferredAnnotation) shares one value of that label if
// one domain of it holds the gang.
//
// The domain is chosen once per attempt, at the PreFilter of the first
// member the attempt schedules, and kept in the group's state
// (groupstate.Attempts) until the attempt fails. It is the tightest domain
// where every member the gang lacks, and the room of its late members,
// fits by the profile's own filters: the domains where their requests fit
// are tried from the one they would fill most, names breaking ties, and
// the first where a trial placement passes the filters is chosen. Every
// member of the attempt is then filtered only on the domain's nodes, and
// any member that comes once the gang is bound on its required domain's.
package placement

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/internal/devices"
	"github.com/muster-dev/muster/pkg/plugins/internal/group"
	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
	"github.com/muster-dev/muster/pkg/resources"
	"github.com/muster-dev/muster/pkg/topology"
)

// Name is the plugin's name in the registry and in scheduler configurations.
const Name = "Placement"

var (
	_ fwk.PreFilterPlugin   = &Placement{}
	_ fwk.FilterPlugin      = &Placement{}
	_ fwk.SignPlugin        = &Placement{}
	_ fwk.EnqueueExtensions = &Placement{}
)

// Groups is what Placement reads of the scheduler's groups.
type Groups interface {
	PodGroup(key types.NamespacedName) *v1alpha1.PodGroup
	Topology(key types.NamespacedName) (*topology.Topology, error)
	// BoundNode is a node a member of the group is bound to.
	BoundNode(key types.NamespacedName) (string, bool)
	LackingMembers(key types.NamespacedName, minMember int32) []*corev1.Pod
	// LateMembers is where the group's members created late stand.
	LateMembers(key types.NamespacedName) group.LateMembers
	// Promises is the room other gangs' attempts under way still need.
	Promises(except types.NamespacedName) []group.Promise
	Attempts() *groupstate.Attempts
}

// Placement keeps a gang that requires a topology domain inside one.
type Placement struct {
	framework  framework.Framework
	groups     Groups
	partitions partitions
	features   feature.Features
}

// New builds the plugin over the scheduler's group model.
func New(_ context.Context, _ runtime.Object, handle fwk.Handle, groups *group.Model) (fwk.Plugin, error) {
	return NewWithGroups(handle, groups)
}

// NewWithGroups builds the plugin over the groups; unit tests build it
// this way.
func NewWithGroups(handle fwk.Handle, groups Groups) (*Placement, error) {
	// A domain's trial runs the profile's PreFilter for each member, which
	// only the framework itself can.
	fw, ok := handle.(framework.Framework)
	if !ok {
		return nil, fmt.Errorf("%s needs the scheduler's framework as its handle, got %T", Name, handle)
	}
	return &Placement{framework: fw, groups: groups, features: feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)}, nil
}

// Name returns the plugin's name.
func (p *Placement) Name() string { return Name }

// trialKey marks the cycle state of a domain's trial placement, whose
// PreFilter must not choose a domain in turn.
const trialKey fwk.StateKey = Name + "/trial"

type trialMark struct{}

func (trialMark) Clone() fwk.StateData { return trialMark{} }

// PreFilter narrows the nodes of a member whose gang has a topology
// constraint to its domain's: once members are bound, the required domain
// they are in; before, the domain of the gang's attempt, chosen now if
// none is. A member Kueue's topology scheduling places
// (topology.KueuePlaces) is left where Kueue put it.
func (p *Placement) PreFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if _, err := state.Read(trialKey); err == nil {
		return nil, nil
	}
	cycle, err := groupstate.CycleOf(state)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if !cycle.Grouped || topology.KueuePlaces(pod) {
		// Kueue's node selector already says where: a domain chosen here
		// could only disagree, and leave the gang unschedulable.
		return nil, nil
	}
	key, pg, topo := cycle.Key, cycle.PodGroup, cycle.Topology
	if pg == nil {
		return nil, nil
	}
	if cycle.TopologyErr != nil || topo == nil || topo.DomainKey == "" && topo.PreferredDomainKey == "" {
		// Gang turns away a member of an invalid topology.
		return nil, nil
	}
	c := constraint{required: topo.DomainKey, preferred: topo.PreferredDomainKey}
	if node, ok := p.groups.BoundNode(key); ok {
		// The preference was the attempt's; the requirement is the gang's.
		if c.required == "" {
			return nil, nil
		}
		if info, err := p.framework.SnapshotSharedLister().NodeInfos().Get(node); err == nil {
			if domain, labeled := info.Node().Labels[c.required]; labeled {
				return inDomain(state, nodes, constraint{required: c.required}, groupstate.Domain{Name: domain}, key)
			}
		}
	}
	attempts := p.groups.Attempts()
	d, chosen := attempts.Domain(key)
	if !chosen {
		d = p.choose(ctx, pod, pg, topo, c, nodes)
		attempts.ChooseDomain(key, d)
		group.ReportDomainChoice(d)
		klog.FromContext(ctx).V(2).Info("Chose a topology domain", "podGroup", key, "required", c.required, "preferred", c.preferred,
			"domain", d.String(), "unplaceable", d.Unplaceable)
	}
	switch {
	case d.Unplaceable != "":
		// Resolvable: preemption may free a domain (GangPreemption).
		return nil, fwk.NewStatus(fwk.Unschedulable, d.Unplaceable)
	case !d.IsSet() && d.Nodes == nil:
		// Preferred only, and the gang fits nowhere as it is: the
		// filters say why.
		return nil, nil
	}
	return inDomain(state, nodes, c, d, key)
}

// SignerName names Placement's fragment of a pod's signature.
const SignerName = "muster.dev/Placement.Domain()"

// SignPod signs a member of a gang that must stay in one domain by its
// group: 1.37's opportunistic batching hands a pod the next node of the
// previous pod of its signature, and only its own gang's members are in
// its domain. Every other pod signs alike.
func (p *Placement) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	key, ok := topology.GroupOf(pod)
	if !ok {
		return []fwk.SignFragment{{Key: SignerName}}, nil
	}
	topo, err := p.groups.Topology(key)
	if err == nil && topo != nil && topo.DomainKey == "" && topo.PreferredDomainKey == "" {
		return []fwk.SignFragment{{Key: SignerName}}, nil
	}
	// Constrained, or not known yet: by its group.
	return []fwk.SignFragment{{Key: SignerName, Value: key.String()}}, nil
}

// constraint is the labels of a gang's topology constraint: required,
// preferred, or both.
type constraint struct{ required, preferred string }

// holds reports whether the node is in the domain.
func (c constraint) holds(d groupstate.Domain, node *corev1.Node) bool {
	if d.Name != "" && node.Labels[c.required] != d.Name {
		return false
	}
	if d.Preferred != "" && node.Labels[c.preferred] != d.Preferred {
		return false
	}
	return true
}

// label names the domain's labels and values, for messages.
func (c constraint) label(d groupstate.Domain) string {
	var parts []string
	if d.Name != "" {
		parts = append(parts, c.required+"="+d.Name)
	}
	if d.Preferred != "" {
		parts = append(parts, c.preferred+"="+d.Preferred)
	}
	return strings.Join(parts, ",")
}

// domainKey is where PreFilter leaves the cycle's domain for Filter.
const domainKey fwk.StateKey = Name + "/domain"

// cycleDomain is the domain a member is filtered in.
type cycleDomain struct {
	constraint
	domain groupstate.Domain
}

func (d cycleDomain) Clone() fwk.StateData { return d }

// inDomain leaves the domain in the cycle state, for Filter, and returns
// the PreFilter result of its nodes.
func inDomain(state fwk.CycleState, nodes []fwk.NodeInfo, c constraint, d groupstate.Domain, key types.NamespacedName) (*fwk.PreFilterResult, *fwk.Status) {
	state.Write(domainKey, cycleDomain{constraint: c, domain: d})
	// Filter checks each node's labels again: a node relabelled since the
	// domain was chosen is not used.
	var names sets.Set[string]
	if d.Nodes != nil {
		names = d.Nodes.Clone()
	} else {
		names = sets.New[string]()
		for _, n := range nodes {
			if c.holds(d, n.Node()) {
				names.Insert(n.Node().Name)
			}
		}
	}
	if names.Len() == 0 {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("group %s is placed in %s, which has no node left", key, c.label(d)))
	}
	return &fwk.PreFilterResult{NodeNames: names}, nil
}

// Filter keeps the member off nodes outside its domain. PreFilter's result
// already does, but kube-scheduler tries a nominated node, and a batch's
// hint, with the filters alone.
func (p *Placement) Filter(_ context.Context, state fwk.CycleState, _ *corev1.Pod, node fwk.NodeInfo) *fwk.Status {
	data, err := state.Read(domainKey)
	if err != nil {
		return nil
	}
	d := data.(cycleDomain)
	if !d.holds(d.domain, node.Node()) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node is outside the gang's domain "+d.label(d.domain))
	}
	return nil
}

// PreFilterExtensions returns nil: the plugin keeps no per-cycle state.
func (p *Placement) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// domain is the nodes that share one value of a constraint's label, or
// of both its labels.
type domain struct {
	id    groupstate.Domain
	nodes []fwk.NodeInfo
	// fill is the share of the domain's free room the members' requests
	// take, of its scarcest resource (resources.Fill).
	fill float64
}

// choose returns the attempt's domain: where the members the gang lacks,
// and the room held for its late members, pass the profile's filters in
// the tightest domain of its preferred label (inside one of its required
// label), else in the tightest of its required label; with a preferred
// label only, and no domain of it holding the gang, no domain; and with a
// required one that no domain holds, none, saying which came closest.
func (p *Placement) choose(ctx context.Context, pod *corev1.Pod, pg *v1alpha1.PodGroup, topo *topology.Topology, c constraint, nodes []fwk.NodeInfo) groupstate.Domain {
	key := types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}
	late := p.groups.LateMembers(key)
	standIns, lateClaims := latePods(key, topo, late)
	members := append(lackingWith(p.groups.LackingMembers(key, pg.Spec.MinMember-late.Total()), pod), standIns...)
	dev, err := p.newTrialDevices(members, lateClaims)
	if err != nil {
		return groupstate.Domain{Unplaceable: fmt.Sprintf("group %s: %v", key, err)}
	}
	if err := dev.unmade(members); err != nil {
		return groupstate.Domain{WaitsForClaims: true, Unplaceable: fmt.Sprintf("group %s waits for its members' ResourceClaims, which kube-controller-manager makes from their templates: %v", key, err)}
	}
	// A domain where an attempt failed since is not tried again before
	// the gang backs off: the next one is.
	tried := p.groups.Attempts().TriedDomains(key)
	promised := p.groups.Promises(key)
	if c.preferred != "" {
		found, err := p.tightest(ctx, members, dev, domainsOf(nodes, p.partitions.of(nodes, level{c, true}), members), tried, promised)
		if err != nil {
			return groupstate.Domain{Unplaceable: fmt.Sprintf("group %s: %v", key, err)}
		}
		if found.fits {
			return found.domain
		}
	}
	if c.required == "" {
		return p.fewestPreferred(ctx, members, dev, nodes, p.partitions.of(nodes, level{c, true}), c, groupstate.Domain{}, promised)
	}
	domains := domainsOf(nodes, p.partitions.of(nodes, level{c, false}), members)
	if len(domains) == 0 {
		return groupstate.Domain{Unplaceable: fmt.Sprintf("group %s must stay in one %s domain, and no node has that label", key, c.required)}
	}
	found, err := p.tightest(ctx, members, dev, domains, tried, promised)
	switch {
	case err != nil:
		return groupstate.Domain{Unplaceable: fmt.Sprintf("group %s: %v", key, err)}
	case found.fits && c.preferred != "":
		return p.fewestPreferred(ctx, members, dev, found.nodes, newPartition(found.nodes, c.byPreferred), c, found.domain, promised)
	case found.fits:
		return found.domain
	case found.most < 0 && len(found.skipped) > 0:
		return groupstate.Domain{Unplaceable: fmt.Sprintf("group %s: its attempts failed in every %s domain that could hold it (%s), other pods taking the room first",
			key, c.required, strings.Join(found.skipped, ", "))}
	case found.most < 0:
		// No domain has room for the requests: the closest by them says
		// how many members it takes.
		placed, err := p.trial(ctx, members, dev, domains[0].nodes, promised)
		if err != nil {
			return groupstate.Domain{Unplaceable: fmt.Sprintf("group %s: trying %s: %v", key, domains[0].id, err)}
		}
		found.closest, found.most = domains[0].id, len(placed)
	}
	message := topology.NoDomainMessage(key, c.required, len(members), found.closest.String(), found.most)
	if i := slices.IndexFunc(domains, func(d domain) bool { return d.id.String() == found.closest.String() }); i >= 0 {
		if short := dev.shortfall(ctx, members, domains[i]); short != "" {
			group.ReportDeviceShortfall(group.ShortInDomain)
			message += ": " + short
		}
	}
	return groupstate.Domain{Unplaceable: message}
}

// found is what a search of domains found: the domain where the members
// fit, or the closest, where most of them did (-1 when no domain's free
// room took their requests), and the domains it skipped, tried already.
type found struct {
	domain  groupstate.Domain
	fits    bool
	nodes   []fwk.NodeInfo // the domain's
	closest groupstate.Domain
	most    int
	skipped []string
}

// tightest tries the domains, in their order, and returns the first where
// every member passes the filters.
func (p *Placement) tightest(ctx context.Context, members []*corev1.Pod, dev *trialDevices, domains []domain, tried sets.Set[string], promised []group.Promise) (found, error) {
	f := found{most: -1}
	for _, d := range domains {
		if d.fill > 1 {
			// Fit is the filters' to say, but a trial where the requests
			// alone do not fit is wasted: the domains after fit no better.
			break
		}
		if tried.Has(d.id.String()) {
			f.skipped = append(f.skipped, d.id.String())
			continue
		}
		placed, err := p.trial(ctx, members, dev, d.nodes, promised)
		if err != nil {
			return f, fmt.Errorf("trying %s: %w", d.id, err)
		}
		if len(placed) == len(members) {
			f.domain, f.fits, f.nodes = d.id, true, d.nodes
			f.domain.Nodes = nodeNames(d.nodes)
			return f, nil
		}
		if len(placed) > f.most {
			f.closest, f.most = d.id, len(placed)
		}
	}
	return f, nil
}

// fewestPreferred narrows d, where the members fit but in no one domain
// of the preferred label, to as few of those domains as hold them: the
// members are placed in the roomiest first, the nodes without the label
// last, and d keeps the nodes of the domains they took. d is as it was if
// they do not fit after all. part is the nodes' partition by the preferred
// label: the scheduler's kept one when nodes are all its nodes.
func (p *Placement) fewestPreferred(ctx context.Context, members []*corev1.Pod, dev *trialDevices, nodes []fwk.NodeInfo, part *partition, c constraint, d groupstate.Domain, promised []group.Promise) groupstate.Domain {
	subdomains := domainsOf(nodes, part, members)
	slices.SortStableFunc(subdomains, func(a, b domain) int { return cmp.Compare(a.fill, b.fill) })
	var ordered []fwk.NodeInfo
	subdomainOf := map[string]int{}
	for i, sub := range subdomains {
		for _, n := range sub.nodes {
			subdomainOf[n.Node().Name] = i
		}
		ordered = append(ordered, sub.nodes...)
	}
	var unlabeled []fwk.NodeInfo
	for _, n := range nodes {
		if _, labeled := subdomainOf[n.Node().Name]; !labeled {
			unlabeled = append(unlabeled, n)
		}
	}
	placed, err := p.trial(ctx, members, dev, append(ordered, unlabeled...), promised)
	if err != nil || len(placed) < len(members) {
		return d
	}
	taken, tookUnlabeled := sets.New[int](), false
	var kept []fwk.NodeInfo
	for _, node := range placed {
		if i, labeled := subdomainOf[node]; labeled && !taken.Has(i) {
			taken.Insert(i)
			kept = append(kept, subdomains[i].nodes...)
		} else if !labeled && !tookUnlabeled {
			tookUnlabeled = true
			kept = append(kept, unlabeled...)
		}
	}
	d.Nodes = nodeNames(kept)
	return d
}

// nodeNames is the set of the nodes' names.
func nodeNames(nodes []fwk.NodeInfo) sets.Set[string] {
	names := make(sets.Set[string], len(nodes))
	for _, n := range nodes {
		names.Insert(n.Node().Name)
	}
	return names
}

// byRequired is the node's domain of the required label.
func (c constraint) byRequired(node *corev1.Node) (groupstate.Domain, bool) {
	value, ok := node.Labels[c.required]
	return groupstate.Domain{Name: value}, ok
}

// byPreferred is the node's domain of the preferred label, inside its
// domain of the required one when the gang has one.
func (c constraint) byPreferred(node *corev1.Node) (groupstate.Domain, bool) {
	preferred, ok := node.Labels[c.preferred]
	if !ok {
		return groupstate.Domain{}, false
	}
	d := groupstate.Domain{Preferred: preferred}
	if c.required != "" {
		if d.Name, ok = node.Labels[c.required]; !ok {
			return d, false
		}
	}
	return d, true
}

// lackingWith returns the members the gang lacks, pod among them; pod
// alone when the gang lacks none (it grows past its quorum).
func lackingWith(members []*corev1.Pod, pod *corev1.Pod) []*corev1.Pod {
	if len(members) == 0 {
		return []*corev1.Pod{pod}
	}
	if slices.ContainsFunc(members, func(m *corev1.Pod) bool { return m.UID == pod.UID }) {
		return members
	}
	return append([]*corev1.Pod{pod}, members[:len(members)-1]...)
}

// latePods stand for the members the group's owner creates late, whose
// room is held in the gang's domain with it, as what their pod template
// says they request, claim and where they may run (topology.LateMember);
// the claims of those that claim devices are returned by the stand-ins'
// UIDs.
func latePods(key types.NamespacedName, topo *topology.Topology, late group.LateMembers) ([]*corev1.Pod, map[types.UID]*resourcev1.ResourceClaim) {
	var pods []*corev1.Pod
	claims := map[types.UID]*resourcev1.ResourceClaim{}
	for _, role := range slices.Sorted(maps.Keys(late.Missing)) {
		for i := range late.Missing[role] {
			pod := topo.Late[role].Pod()
			pod.Namespace, pod.Name = key.Namespace, fmt.Sprintf("%s-%s-late-%d", key.Name, role, i)
			pod.UID = types.UID(key.String() + "/" + pod.Name)
			pods = append(pods, pod)
			if claim := topology.Claim(pod.Namespace, pod.Name, pod.UID, topo.Late[role].Devices); claim != nil {
				claims[pod.UID] = claim
			}
		}
	}
	return pods, claims
}

// domainsOf groups the nodes by their domain in the partition of them (a
// node without one is left out): first the domains where the members'
// requests fit, the one they fill most first; then the others, the one
// closest to taking them first; names break ties.
func domainsOf(nodes []fwk.NodeInfo, part *partition, members []*corev1.Pod) []domain {
	var need corev1.ResourceList
	for _, m := range members {
		need = resources.Add(need, resources.OfPod(m), 1)
	}
	type tally struct {
		domain
		free resources.Amounts
	}
	tallies := make([]*tally, len(part.domains))
	for i, n := range nodes {
		j := part.of[i]
		if j < 0 {
			continue
		}
		t := tallies[j]
		if t == nil {
			t = &tally{domain: domain{id: part.domains[j]}, free: resources.Amounts{}}
			for resource := range need {
				t.free[resource] = 0
			}
			tallies[j] = t
		}
		t.nodes = append(t.nodes, n)
		t.free.AddFree(n)
	}
	domains := make([]domain, 0, len(tallies))
	for _, t := range tallies {
		t.fill = resources.Fill(need, t.free)
		domains = append(domains, t.domain)
	}
	slices.SortFunc(domains, func(a, b domain) int {
		aFits, bFits := a.fill <= 1, b.fill <= 1
		switch {
		case aFits != bFits:
			if aFits {
				return -1
			}
			return 1
		case aFits:
			// The tightest fit first: the gang leaves the roomier domains
			// whole for the gangs after it.
			if c := cmp.Compare(b.fill, a.fill); c != 0 {
				return c
			}
		default:
			if c := cmp.Compare(a.fill, b.fill); c != 0 {
				return c
			}
		}
		return strings.Compare(a.id.String(), b.id.String())
	})
	return domains
}

// trial places the members one after another on the first of the nodes
// where each passes the profile's filters, as if bound there, and returns
// the node of each it placed before one fitted nowhere. The members other
// gangs' attempts have yet to place in their domains (promised) are placed
// first, each on its domain's nodes, as far as they fit: the room they
// need is not the gang's. Members alike (the framework signs them the
// same) skip the nodes an earlier one failed on: a node only fills as the
// trial goes.
func (p *Placement) trial(ctx context.Context, members []*corev1.Pod, dev *trialDevices, nodes []fwk.NodeInfo, promised []group.Promise) ([]string, error) {
	dev.start()
	var place placer = newNodeCopies(nodes)
	if readsOtherNodes(members) {
		// Their PreFilter reads the members placed before them, on any
		// node: only a copy of the whole snapshot tells it.
		snapshot := p.framework.MutableSnapshotSharedLister()
		if err := snapshot.StartMutations(); err != nil {
			return nil, err
		}
		defer func() {
			if err := snapshot.EndMutations(); err != nil {
				klog.FromContext(ctx).Error(err, "Ending a topology domain's trial")
			}
		}()
		place = snapshotCopy{snapshot}
	}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Node().Name
	}
	t := trialRun{p: p, place: place, devices: dev, names: names, from: map[string]int{}}
	for _, promise := range promised {
		if !slices.ContainsFunc(names, promise.Nodes.Has) {
			continue
		}
		for _, member := range promise.Members {
			node, err := t.placeOne(ctx, member, promise.Nodes)
			if err != nil {
				return nil, err
			}
			if node == "" {
				break
			}
		}
	}
	var placed []string
	for _, member := range members {
		node, err := t.placeOne(ctx, member, nil)
		if err != nil || node == "" {
			return placed, err
		}
		placed = append(placed, node)
	}
	return placed, nil
}

// trialRun is one trial's placements.
type trialRun struct {
	p       *Placement
	place   placer
	devices *trialDevices
	names   []string
	// from is where the next member of a signature starts looking.
	from map[string]int
}

// placeOne places the member on the first node, of allowed if it is not
// nil, where it passes the filters, and returns the node, "" for none.
func (t trialRun) placeOne(ctx context.Context, member *corev1.Pod, allowed sets.Set[string]) (string, error) {
	state := framework.NewCycleState()
	state.Write(trialKey, trialMark{})
	result, status, _ := t.p.framework.RunPreFilterPlugins(ctx, state, member)
	if !status.IsSuccess() {
		return "", nil
	}
	claims, counted, err := t.devices.claimsOf(member)
	if err != nil {
		return "", err
	}
	if counted {
		devices.SkipFilter(state)
	}
	signature := string(t.p.framework.SignPod(ctx, member))
	start := 0
	if signature != "" {
		start = t.from[signature]
	}
	for i := start; i < len(t.names); i++ {
		name := t.names[i]
		if !result.AllNodes() && !result.NodeNames.Has(name) || allowed != nil && !allowed.Has(name) {
			continue
		}
		info, err := t.place.node(name)
		if err != nil {
			return "", err
		}
		if !t.p.framework.RunFilterPluginsWithNominatedPods(ctx, state, member, info).IsSuccess() {
			continue
		}
		if counted {
			fit, err := t.devices.take(ctx, info.Node(), claims)
			if err != nil {
				return "", err
			}
			if !fit {
				continue
			}
		}
		if signature != "" {
			t.from[signature] = i
		}
		assumed := member.DeepCopy()
		assumed.Spec.NodeName = name
		podInfo, err := framework.NewPodInfo(assumed)
		if err != nil {
			return "", err
		}
		return name, t.place.add(podInfo, name)
	}
	return "", nil
}

// readsOtherNodes reports whether a member's filters read the pods on
// other nodes than the one filtered: inter-pod affinity, anti-affinity or
// spreading of its own.
func readsOtherNodes(members []*corev1.Pod) bool {
	return slices.ContainsFunc(members, func(m *corev1.Pod) bool {
		a := m.Spec.Affinity
		return a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil) || len(m.Spec.TopologySpreadConstraints) > 0
	})
}

// placer is where a trial places its members.
type placer interface {
	node(name string) (fwk.NodeInfo, error)
	add(pod fwk.PodInfo, node string) error
}

// nodeCopies places on copies of the domain's nodes, made as a member is
// placed on each: what members whose filters read only their own node
// need.
type nodeCopies struct {
	nodes  map[string]fwk.NodeInfo
	copied sets.Set[string]
}

func newNodeCopies(nodes []fwk.NodeInfo) *nodeCopies {
	c := &nodeCopies{nodes: make(map[string]fwk.NodeInfo, len(nodes)), copied: sets.New[string]()}
	for _, n := range nodes {
		c.nodes[n.Node().Name] = n
	}
	return c
}

func (c *nodeCopies) node(name string) (fwk.NodeInfo, error) {
	n, ok := c.nodes[name]
	if !ok {
		return nil, fmt.Errorf("node %s is not in the domain", name)
	}
	return n, nil
}

func (c *nodeCopies) add(pod fwk.PodInfo, node string) error {
	n, err := c.node(node)
	if err != nil {
		return err
	}
	if !c.copied.Has(node) {
		n = n.Snapshot()
		c.nodes[node] = n
		c.copied.Insert(node)
	}
	n.AddPodInfo(pod)
	return nil
}

// snapshotCopy places on the scheduler's snapshot, in a mutation session.
type snapshotCopy struct {
	fwk.MutableSnapshotSharedLister
}

func (s snapshotCopy) node(name string) (fwk.NodeInfo, error) { return s.NodeInfos().Get(name) }

func (s snapshotCopy) add(pod fwk.PodInfo, node string) error { return s.AddPod(pod, node) }

// EventsToRegister lists the events that can give a gang that fits no
// domain room in one: room freed, a node added, grown or labeled.
func (p *Placement) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, QueueingHintFn: group.IsRoomFreed},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel}, QueueingHintFn: group.QueueAlways},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.UpdateNodeAllocatable}, QueueingHintFn: group.IsAllocatableGrown},
	}, nil
}
