package gangpreemption

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/muster-dev/muster/pkg/plugins/internal/devices"
	"github.com/muster-dev/muster/pkg/plugins/internal/groupstate"
)

// A gang short of its quorum needs room for all its missing members at
// once. The search works on the cycle's snapshot, changed in a mutation
// session that ends with the cycle's PostFilter:
//
//  1. The gang's own reservations, whose attempt ends, are room.
//  2. Each missing member in turn, with its own PreFilter state, goes to
//     the first node where the profile's filters pass; failing that, the
//     Evaluator's dry run picks a node and its victims, as for one pod,
//     and the victims leave the snapshot. The member then stays on its
//     node for the members after it. A member signed alike an earlier one
//     reuses that one's filter results and dry-run candidates on the nodes
//     the search has not changed since (alike.go).
//  3. The victims taken are given back, the dearest first, while every
//     member still passes its filters on its node.
//
// Nothing is taken unless every member is placed. The cost is bounded by
// the members times one DefaultPreemption of a pod (a filter pass over the
// nodes and a dry run over at most max(10% of them, 100)), plus the
// victims taken times the members on a victim's node for step 3 (times
// every member, where a member's filters read other nodes: local.go). Alike members cost a filter
// pass over the nodes changed since and a dry run each time half the
// candidates are used up.

// placement is a member of the gang on the node the search put it: info
// is the member as bound there, for the snapshot.
type placement struct {
	member *corev1.Pod
	info   fwk.PodInfo
	state  fwk.CycleState
	node   string
	// claims are the member's device claims its search counts (devices.go).
	claims []*resourcev1.ResourceClaim
}

// gangSearch is one search for a gang's room, on the mutated snapshot.
type gangSearch struct {
	pl       *GangPreemption
	ctx      context.Context
	logger   klog.Logger
	snapshot fwk.MutableSnapshotSharedLister
	pdbs     []*policy.PodDisruptionBudget
	// promised are the nodes of victims preempted for other gangs not
	// admitted yet: the room there is theirs.
	promised sets.Set[string]
	placed   []placement
	// taken are the victims so far, as units by name, in the order taken.
	taken []*unit
	alike *alike
	// devices counts the devices of the members that claim some, nil when
	// none does.
	devices *devices.Room
}

// preemptForGang makes room for the members the gang lacks, or takes
// nothing. It never ends the chain: Gang's PostFilter ends the attempt,
// with no backoff when room was made (groupstate.RoomMade in the state). An
// error is logged and left for Gang to tell on the gang
// (groupstate.SearchFailed); it ends only the preemption, never the teardown.
func (pl *GangPreemption) preemptForGang(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, m fwk.NodeToStatusReader, key types.NamespacedName, pg *v1alpha1.PodGroup) (*fwk.PostFilterResult, *fwk.Status) {
	result, status := pl.makeRoomForGang(ctx, state, pod, m, key, pg)
	if status.Code() == fwk.Error {
		klog.FromContext(ctx).Error(status.AsError(), "Preempting for a gang", "podGroup", key)
		state.Write(groupstate.SearchFailedKey, &groupstate.SearchFailed{Err: status.AsError()})
		return nil, fwk.NewStatus(fwk.Unschedulable, "preemption failed: "+status.Message())
	}
	return result, status
}

func (pl *GangPreemption) makeRoomForGang(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, m fwk.NodeToStatusReader, key types.NamespacedName, pg *v1alpha1.PodGroup) (*fwk.PostFilterResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	// As for one pod: preemption helps only where a filter failed for want
	// of what victims hold.
	potential, err := m.NodesForStatusCode(pl.handle.SnapshotSharedLister().NodeInfos(), fwk.Unschedulable)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if len(potential) == 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, "preemption: not helpful for scheduling")
	}
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == corev1.PreemptNever {
		return nil, fwk.NewStatus(fwk.Unschedulable, "preemption: not eligible due to preemptionPolicy=Never.")
	}
	members := lackingWith(pl.groups.LackingMembers(key, pg.Spec.MinMember), pod)
	if len(members) == 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, "preemption: the gang has too few members to reach its minMember")
	}
	if pl.going.waits(key, pl.inSnapshot) {
		// Room is being made already: the member is woken as the victims
		// go, and its siblings keep the room they hold.
		state.Write(groupstate.RoomMadeKey, &groupstate.RoomMade{Pending: true})
		return nil, fwk.NewStatus(fwk.Unschedulable, "preemption: waiting for the victims preempted for the gang to go")
	}
	if !pl.groups.Attempts().IsWaiting(key) {
		lower, err := pl.anyPodBelow(corev1helpers.PodPriority(pod))
		if err != nil {
			return nil, fwk.AsStatus(err)
		}
		if !lower {
			// Nothing the gang may take, and no reservation of its own to
			// give back: a search, one per domain, would find no room.
			return nil, fwk.NewStatus(fwk.Unschedulable, "preemption: no pod of lower priority to take")
		}
	}
	pdbs, err := pl.evaluator.PdbLister.List(labels.Everything())
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("listing PodDisruptionBudgets: %w", err))
	}
	search, status := pl.searchDomains(ctx, key, members, pdbs)
	if !status.IsSuccess() {
		return nil, status
	}
	if len(search.taken) == 0 {
		// Every member fits once the gang's reservations are gone: a retry
		// places it, with nothing to take.
		state.Write(groupstate.RoomMadeKey, &groupstate.RoomMade{})
		return nil, fwk.NewStatus(fwk.Unschedulable, "preemption: the gang fits without victims once its attempt ends")
	}
	node := pl.actuate(logger, pg, pod, search)
	state.Write(groupstate.RoomMadeKey, &groupstate.RoomMade{At: pl.clock.Now()})
	return framework.NewPostFilterResultWithNominatedNode(node),
		fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("preemption: preempting %d victims for the gang's %d missing members", len(victimPods(search.taken)), len(members)))
}

// anyPodBelow reports whether a pod on some node has a priority below
// priority: only such a pod, or a gang it belongs to, can be a victim.
func (pl *GangPreemption) anyPodBelow(priority int32) (bool, error) {
	nodes, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return false, fmt.Errorf("gang preemption: listing nodes: %w", err)
	}
	for _, node := range nodes {
		for _, info := range node.GetPods() {
			if corev1helpers.PodPriority(info.GetPod()) < priority {
				return true, nil
			}
		}
	}
	return false, nil
}

// searchDomains searches for the gang's room in each domain it may free
// (domainsToFree), one domain at a time, with the domain given to the
// gang's attempt so that Placement keeps each member's filters inside it,
// and returns the search whose victims cost least, its domain then the
// attempt's. A gang free to span domains is searched once, over every node.
func (pl *GangPreemption) searchDomains(ctx context.Context, key types.NamespacedName, members []*corev1.Pod, pdbs []*policy.PodDisruptionBudget) (*gangSearch, *fwk.Status) {
	label, domains, err := pl.domainsToFree(key, members)
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("gang preemption: %w", err))
	}
	attempts := pl.groups.Attempts()
	previous, decided := attempts.Domain(key)
	status := fwk.NewStatus(fwk.Unschedulable, "preemption: no node has the label "+label+" the gang must share one value of")
	var best *gangSearch
	var bestCost cost
	var bestDomain string
	for _, d := range domains {
		if label != "" {
			attempts.ChooseDomain(key, groupstate.Domain{Name: d})
		}
		search, searched := pl.search(ctx, key, members, pdbs)
		if searched.Code() == fwk.Error {
			return nil, searched
		}
		if !searched.IsSuccess() {
			if best == nil {
				status = searched
			}
			continue
		}
		if c := costOf(search.taken, pdbs); best == nil || c.compare(bestCost) < 0 {
			best, bestCost, bestDomain, status = search, c, d, nil
		}
	}
	switch {
	case label == "":
	case best != nil:
		attempts.ChooseDomain(key, groupstate.Domain{Name: bestDomain})
	case decided:
		attempts.ChooseDomain(key, previous)
	}
	return best, status
}

// search runs one search for the gang's room on the mutated snapshot.
func (pl *GangPreemption) search(ctx context.Context, key types.NamespacedName, members []*corev1.Pod, pdbs []*policy.PodDisruptionBudget) (*gangSearch, *fwk.Status) {
	snapshot := pl.handle.MutableSnapshotSharedLister()
	if err := snapshot.StartMutations(); err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("gang preemption: %w", err))
	}
	search := &gangSearch{pl: pl, ctx: ctx, logger: klog.FromContext(ctx), snapshot: snapshot, pdbs: pdbs, promised: pl.going.promised(key, pl.waitsForRoomMade), alike: newAlike()}
	if dra := pl.handle.SharedDRAManager(); dra != nil && slices.ContainsFunc(members, func(m *corev1.Pod) bool { return len(m.Spec.ResourceClaims) > 0 }) {
		room, err := devices.NewRoom(dra, pl.fts, pl.isLive)
		if err != nil {
			return nil, fwk.AsStatus(fmt.Errorf("gang preemption: counting devices: %w", err))
		}
		search.devices = room
	}
	status := search.run(key, members)
	if err := snapshot.EndMutations(); err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("gang preemption: %w", err))
	}
	return search, status
}

// lackingWith returns the members, the failed pod among them: it is the
// one the cycle nominates.
func lackingWith(members []*corev1.Pod, pod *corev1.Pod) []*corev1.Pod {
	if len(members) == 0 || slices.ContainsFunc(members, func(m *corev1.Pod) bool { return m.UID == pod.UID }) {
		return members
	}
	members[len(members)-1] = pod
	return members
}

// run places every member, taking victims where needed, then gives back
// the victims not needed; Unschedulable when a member fits nowhere.
func (s *gangSearch) run(key types.NamespacedName, members []*corev1.Pod) *fwk.Status {
	if err := s.releaseReservations(key); err != nil {
		return fwk.AsStatus(err)
	}
	for _, m := range members {
		if status := s.place(m); !status.IsSuccess() {
			return status
		}
	}
	if err := s.giveBack(); err != nil {
		return fwk.AsStatus(err)
	}
	return nil
}

// releaseReservations takes the gang's members waiting at Permit off the
// snapshot: its attempt ends, so their room is the gang's to use.
func (s *gangSearch) releaseReservations(key types.NamespacedName) error {
	pods, err := s.pl.groups.Members(key)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			continue
		}
		if wp := s.pl.handle.GetWaitingPod(p.UID); wp != nil {
			if err := s.snapshot.RemovePod(s.logger, wp.GetPod(), wp.GetPod().Spec.NodeName); err != nil {
				return err
			}
		}
	}
	return nil
}

// place puts one member on the first node where it fits, or where the
// Evaluator's dry run finds the cheapest victims, and takes them.
func (s *gangSearch) place(member *corev1.Pod) *fwk.Status {
	state := framework.NewCycleState()
	result, status, _ := s.pl.framework.RunPreFilterPlugins(s.ctx, state, member)
	if !status.IsSuccess() && status.Code() != fwk.Unschedulable {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("preemption: member %s: %s", member.Name, status.Message()))
	}
	claims, err := s.countDevices(state, member)
	if err != nil {
		return fwk.AsStatus(err)
	}
	nodes, err := s.snapshot.NodeInfos().List()
	if err != nil {
		return fwk.AsStatus(err)
	}
	nodes = slices.DeleteFunc(slices.Clone(nodes), func(n fwk.NodeInfo) bool {
		return s.promised.Has(n.Node().Name) || !result.AllNodes() && !result.NodeNames.Has(n.Node().Name)
	})
	known := s.alike.resultsFor(s.pl.framework.SignPod(s.ctx, member))
	node, potential := s.firstFit(state, member, nodes, known)
	if node == "" {
		if len(potential) == 0 {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("preemption: member %s fits on no node, whatever goes", member.Name))
		}
		candidates := known.reusableCandidates()
		if candidates == nil {
			offset, count := s.pl.GetOffsetAndNumCandidates(int32(len(potential)))
			candidates, _, err = s.pl.evaluator.DryRunPreemption(s.ctx, state, member, potential, s.pdbs, offset, count)
			if err != nil && len(candidates) == 0 {
				return fwk.AsStatus(err)
			}
			known.keepCandidates(candidates)
		}
		best := s.pl.evaluator.SelectCandidate(s.ctx, candidates)
		if best == nil {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("preemption: no lower-priority victims would make room for member %s", member.Name))
		}
		if err := s.take(best.Victims().Pods); err != nil {
			return fwk.AsStatus(err)
		}
		node = best.Name()
	}
	info, err := framework.NewPodInfo(onNode(member, node))
	if err != nil {
		return fwk.AsStatus(err)
	}
	if fit, err := s.takeDevices(claims, info.GetPod()); err != nil || !fit {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("preemption: member %s's device claims fit on node %s no more", member.Name, node)).WithError(err)
	}
	if err := s.snapshot.AddPod(info, node); err != nil {
		return fwk.AsStatus(err)
	}
	s.alike.changed(node)
	s.placed = append(s.placed, placement{member: member, info: info, state: state, node: node, claims: claims})
	return nil
}

// firstFit returns the first node, in the snapshot's order, where the
// member passes every filter; else the nodes where it failed only for
// want of room, which preemption may make. Nodes where an alike member
// failed (known) are not filtered again.
func (s *gangSearch) firstFit(state fwk.CycleState, member *corev1.Pod, nodes []fwk.NodeInfo, known *alikeResults) (string, []fwk.NodeInfo) {
	codes := make([]fwk.Code, len(nodes))
	var unknown []int
	for i, n := range nodes {
		code, ok := known.failedOn(n.Node().Name)
		if !ok {
			unknown = append(unknown, i)
		}
		codes[i] = code
	}
	s.pl.handle.Parallelizer().Until(s.ctx, len(unknown), func(j int) {
		i := unknown[j]
		codes[i] = s.pl.handle.RunFilterPluginsWithNominatedPods(s.ctx, state, member, nodes[i]).Code()
		if codes[i] == fwk.Success {
			if fit, err := devicesFit(s.ctx, state, nodes[i].Node(), nil); err != nil || !fit {
				codes[i] = fwk.Unschedulable
			}
		}
	}, Name)
	var potential []fwk.NodeInfo
	for i, code := range codes {
		if code == fwk.Success {
			return nodes[i].Node().Name, nil
		}
		if code == fwk.Unschedulable {
			potential = append(potential, nodes[i])
		}
	}
	for _, i := range unknown {
		known.fail(nodes[i].Node().Name, codes[i])
	}
	return "", potential
}

// take removes the victims' pods from the snapshot, as whole units, and
// tells the PreFilter state of every member placed before.
func (s *gangSearch) take(pods []*corev1.Pod) error {
	for _, u := range s.pl.unitsByName(pods) {
		if err := s.remove(u); err != nil {
			return err
		}
		s.taken = append(s.taken, u)
	}
	return nil
}

func (s *gangSearch) remove(u *unit) error {
	for _, pi := range u.pods {
		if s.devices != nil {
			s.devices.Leave(pi.GetPod().UID)
		}
		node, err := s.snapshot.NodeInfos().Get(pi.GetPod().Spec.NodeName)
		if err != nil {
			return err
		}
		if err := s.snapshot.RemovePod(s.logger, pi.GetPod(), node.Node().Name); err != nil {
			return err
		}
		s.changed(pi, node.Node().Name)
		for _, p := range s.placed {
			if status := s.pl.handle.RunPreFilterExtensionRemovePod(s.ctx, p.state, p.member, pi, node); !status.IsSuccess() {
				return status.AsError()
			}
		}
	}
	return nil
}

func (s *gangSearch) give(u *unit) error {
	for _, pi := range u.pods {
		if s.devices != nil {
			s.devices.Return(pi.GetPod().UID)
		}
		if err := s.snapshot.AddPod(pi, pi.GetPod().Spec.NodeName); err != nil {
			return err
		}
		node, err := s.snapshot.NodeInfos().Get(pi.GetPod().Spec.NodeName)
		if err != nil {
			return err
		}
		s.changed(pi, node.Node().Name)
		for _, p := range s.placed {
			if status := s.pl.handle.RunPreFilterExtensionAddPod(s.ctx, p.state, p.member, pi, node); !status.IsSuccess() {
				return status.AsError()
			}
		}
	}
	return nil
}

// changed forgets the alike results the victim's leaving or coming back
// may change: on its node, or on every node when its anti-affinity reaches
// beyond it.
func (s *gangSearch) changed(victim fwk.PodInfo, node string) {
	if len(victim.GetRequiredAntiAffinityTerms()) > 0 {
		s.alike.forget()
		return
	}
	s.alike.changed(node)
}

// giveBack returns, the dearest first, each victim without which every
// member still passes its filters on its node, checked in the order they
// were placed, each beside the members before it. Where no member's
// filters read other nodes than its own, and the victim bears on none but
// its own, only the members on the victim's nodes are checked (local.go).
func (s *gangSearch) giveBack() error {
	for _, p := range s.placed {
		if err := s.snapshot.RemovePod(s.logger, p.info.GetPod(), p.node); err != nil {
			return err
		}
	}
	local := true
	for _, p := range s.placed {
		local = local && readsOnlyItsNode(p.member, p.state.GetSkipFilterPlugins())
	}
	fits := func(given *unit) bool {
		var added []placement
		defer func() {
			for _, p := range added {
				_ = s.snapshot.RemovePod(s.logger, p.info.GetPod(), p.node)
			}
		}()
		members := s.placed
		if local && given.reachesOnlyItsNodes() {
			members = s.placedOn(given.nodes())
		}
		if s.devices != nil {
			s.devices.ForgetTaken()
		}
		for _, p := range members {
			node, err := s.snapshot.NodeInfos().Get(p.node)
			if err != nil || !s.pl.handle.RunFilterPluginsWithNominatedPods(s.ctx, p.state, p.member, node).IsSuccess() {
				return false
			}
			if fit, err := s.takeDevices(p.claims, p.info.GetPod()); err != nil || !fit {
				return false
			}
			if err := s.snapshot.AddPod(p.info, p.node); err != nil {
				return false
			}
			added = append(added, p)
		}
		return true
	}
	taken, _, err := reprieve(s.taken, s.pdbs, s.give, fits, s.remove)
	s.taken = taken
	return err
}

// placedOn returns the members placed on the nodes, in the order placed.
func (s *gangSearch) placedOn(nodes sets.Set[string]) []placement {
	var on []placement
	for _, p := range s.placed {
		if nodes.Has(p.node) {
			on = append(on, p)
		}
	}
	return on
}

// unitsByName groups victim pods into the units they were taken as: a
// gang taken whole by its group (gangOf), any other pod alone.
func (pl *GangPreemption) unitsByName(pods []*corev1.Pod) []*unit {
	var units []*unit
	byName := map[string]*unit{}
	for _, p := range pods {
		name, keyType := p.Namespace+"/"+p.Name, fwk.PodKeyType
		if key, whole := pl.gangOf(p); whole {
			name, keyType = key.String(), fwk.PodGroupKeyType
		}
		u, ok := byName[name]
		if !ok {
			u = &unit{name: name, priority: podPriority(p), keyType: keyType}
			byName[name] = u
			units = append(units, u)
		}
		info, err := framework.NewPodInfo(p)
		if err != nil {
			continue
		}
		u.pods = append(u.pods, info)
		u.priority = max(u.priority, podPriority(p))
	}
	return units
}

// onNode is the member as if bound to the node, for the snapshot.
func onNode(pod *corev1.Pod, node string) *corev1.Pod {
	placed := pod.DeepCopy()
	placed.Spec.NodeName = node
	return placed
}

// actuate preempts the victims, off the scheduling cycle, records what was
// taken, and nominates the other members onto their room in the
// scheduler's memory; it returns the failed pod's node.
func (pl *GangPreemption) actuate(logger klog.Logger, pg *v1alpha1.PodGroup, pod *corev1.Pod, search *gangSearch) string {
	victims := victimPods(search.taken)
	key := types.NamespacedName{Namespace: pg.Namespace, Name: pg.Name}
	started := pl.clock.Now()
	pl.going.start(key, victims, started, pl.exists)
	// A victim that never goes must not keep the gang out of the queue
	// until the scheduler's periodic flush; and the wait is forgotten.
	pl.clock.AfterFunc(pl.args.victimWait(), func() {
		if pl.going.end(key, started) {
			pl.groups.ActivatePending(logger, pl.handle, key)
		}
	})
	preemptor := &gangPreemptor{pg: pg, pod: pod, priority: podPriority(pod)}
	for _, p := range search.placed {
		preemptor.members = append(preemptor.members, p.member)
	}
	// The victims go maxConcurrentEvictions at a time: a gang may take a
	// thousand pods, and as many calls at once would flood the API server
	// and its watchers.
	go pl.sendVictims(klog.NewContext(context.Background(), logger), pg, preemptor, victims)
	unitNames := names(search.taken)
	reportPreemption(search.taken, len(victims))
	logger.V(2).Info("Preempting for a gang", "podGroup", klog.KObj(pg), "priority", preemptor.priority, "victims", unitNames)
	pl.recordEvent(pg, corev1.EventTypeNormal, ReasonPreempting, "Preempt",
		fmt.Sprintf("took %s (priority below %d) so that its %d missing members fit at once", victimList(unitNames), preemptor.priority, len(search.placed)))
	var node string
	for _, p := range search.placed {
		if p.member.UID == pod.UID {
			node = p.node
			continue
		}
		pl.nominate(logger, p.member, p.node)
	}
	return node
}

// sendVictims preempts the victims taken for the gang,
// maxConcurrentEvictions at a time, then tells each victim gang once what it lost:
// a gang taking a thousand members one by one would otherwise write a
// thousand events meanwhile.
func (pl *GangPreemption) sendVictims(ctx context.Context, pg *v1alpha1.PodGroup, preemptor *gangPreemptor, victims []*corev1.Pod) {
	logger := klog.FromContext(ctx)
	shrinks := map[types.NamespacedName]bool{}
	for key, taken := range victimsByGang(victims) {
		shrinks[key], _ = pl.takenFrom(key, taken)
	}
	evicted := make([]bool, len(victims))
	parallelize.NewParallelizer(int(pl.args.MaxConcurrentEvictions)).Until(ctx, len(victims), func(i int) {
		victim := victims[i]
		c := &gangCandidate{node: victim.Spec.NodeName, victims: &extenderv1.Victims{Pods: victims}, shrinks: shrinks}
		inMemory, err := pl.executor.PreemptPod(ctx, c, preemptor, victim, Name)
		if err != nil {
			logger.Error(err, "Preempting a victim", "pod", klog.KObj(victim), "podGroup", klog.KObj(pg))
		}
		evicted[i] = err == nil
		// No deletion will tell the gang this victim is gone.
		if err != nil || inMemory {
			pl.gone(victim.UID)
		}
	}, Name)
	var gone []*corev1.Pod
	for i, victim := range victims {
		if evicted[i] {
			gone = append(gone, victim)
		}
	}
	for key, taken := range victimsByGang(gone) {
		pl.tellVictimGang(key, taken, preemptor)
	}
}

// nominate records the node a sibling's room is made on, as the framework
// records the failed pod's: in the scheduler's nominator at once, so that
// no pod of its priority or lower takes the room while the victims go,
// and in its status, which the nominator keeps to when the sibling's own
// attempt fails. The status is written by the scheduler's asynchronous
// API calls when they are on, else by a patch off the cycle.
func (pl *GangPreemption) nominate(logger klog.Logger, member *corev1.Pod, node string) {
	nomination := &fwk.NominatingInfo{NominatedNodeName: node, NominatingMode: fwk.ModeOverride}
	if info, err := framework.NewPodInfo(member); err == nil {
		pl.handle.AddNominatedPod(logger, info, nomination)
	}
	if cacher := pl.handle.APICacher(); cacher != nil {
		if _, err := cacher.PatchPodStatus(member, nil, nomination); err != nil {
			logger.Error(err, "Nominating a member onto its room", "pod", klog.KObj(member), "node", node)
		}
		return
	}
	go func() {
		patch := fmt.Appendf(nil, `{"status":{"nominatedNodeName":%q}}`, node)
		_, err := pl.handle.ClientSet().CoreV1().Pods(member.Namespace).Patch(context.Background(), member.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
		if err != nil {
			logger.Error(err, "Nominating a member onto its room", "pod", klog.KObj(member), "node", node)
		}
	}()
}

// gangPreemptor is a gang as the framework's preemption executor names
// the preemptor in its events and conditions.
type gangPreemptor struct {
	pg       *v1alpha1.PodGroup
	pod      *corev1.Pod
	members  []*corev1.Pod
	priority int32
}

var _ preemption.ExecutorPreemptor = &gangPreemptor{}

func (g *gangPreemptor) GetName() string       { return g.pg.Name }
func (g *gangPreemptor) GetNamespace() string  { return g.pg.Namespace }
func (g *gangPreemptor) UID() types.UID        { return g.pg.UID }
func (g *gangPreemptor) SchedulerName() string { return g.pod.Spec.SchedulerName }
func (g *gangPreemptor) Priority() int32       { return g.priority }
func (g *gangPreemptor) Type() string          { return "gang" }

// Obj is the failed member: the event recorder's scheme does not know the
// PodGroup type.
func (g *gangPreemptor) Obj() runtime.Object { return g.pod }

func (g *gangPreemptor) Pods() map[string]*corev1.Pod {
	pods := make(map[string]*corev1.Pod, len(g.members))
	for _, m := range g.members {
		pods[m.Namespace+"/"+m.Name] = m
	}
	return pods
}

// gangCandidate is a victim's node and every victim of the preemption,
// with each victim gang's shrinks (owners.go).
type gangCandidate struct {
	node    string
	victims *extenderv1.Victims
	shrinks map[types.NamespacedName]bool
}

func (c *gangCandidate) Name() string                 { return c.node }
func (c *gangCandidate) Victims() *extenderv1.Victims { return c.victims }
func (c *gangCandidate) NumPodGroupDisruptions() int  { return 0 }
