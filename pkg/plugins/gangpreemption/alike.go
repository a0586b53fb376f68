package gangpreemption

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
)

// alike keeps what a gang's search found for a member, by the member's
// signature, for the members after it that share that signature: most of
// a gang's members are alike. The framework signs two pods alike only when
// every Filter plugin gives them the same result on a node in the same
// state (the promise 1.37's opportunistic batching rests on), so a result
// holds for as long as the search leaves its node unchanged.
//
// What a signed pod's filters read of other nodes is only other pods'
// required anti-affinity (a signed pod has no affinity or spread of its
// own), so taking a victim that has such terms forgets every result.
type alike struct {
	bySignature map[string]*alikeResults
}

// alikeResults are one signature's results on the nodes unchanged since.
type alikeResults struct {
	// failed is each node's Filter code where the member did not fit; a
	// node where it fit was changed by placing it there.
	failed map[string]fwk.Code
	// candidates are the Evaluator's dry-run candidates: a node and the
	// victims that make room there; found is how many the dry run found.
	candidates []preemption.Candidate
	found      int
}

func newAlike() *alike {
	return &alike{bySignature: map[string]*alikeResults{}}
}

// resultsFor returns the results kept for the signature, nil for a pod the
// framework cannot sign.
func (a *alike) resultsFor(signature fwk.PodSignature) *alikeResults {
	if signature == nil {
		return nil
	}
	r, ok := a.bySignature[string(signature)]
	if !ok {
		r = &alikeResults{failed: map[string]fwk.Code{}}
		a.bySignature[string(signature)] = r
	}
	return r
}

// changed forgets every result on the node: its Filter codes, and the
// candidates on it or with a victim on it. A candidate's victims reach
// beyond its node where it takes a gang whole, or an elastic group's
// workers above the one it frees the node of: one of those the search
// has taken since, or placed a member beside, is stale.
func (a *alike) changed(node string) {
	for _, r := range a.bySignature {
		delete(r.failed, node)
		r.candidates = slices.DeleteFunc(r.candidates, func(c preemption.Candidate) bool { return c.Name() == node || hasVictimOn(c, node) })
	}
}

// hasVictimOn reports whether one of the candidate's victims is on the node.
func hasVictimOn(c preemption.Candidate, node string) bool {
	return slices.ContainsFunc(c.Victims().Pods, func(p *corev1.Pod) bool { return p.Spec.NodeName == node })
}

// forget forgets every result on every node.
func (a *alike) forget() {
	clear(a.bySignature)
}

// failedOn returns the Filter code kept for the node.
func (r *alikeResults) failedOn(node string) (fwk.Code, bool) {
	if r == nil {
		return fwk.Success, false
	}
	code, ok := r.failed[node]
	return code, ok
}

// fail keeps the node's Filter code.
func (r *alikeResults) fail(node string, code fwk.Code) {
	if r != nil {
		r.failed[node] = code
	}
}

// reusableCandidates returns the candidates kept while at least half of
// those the dry run found are left; fewer, and the choice among them would
// be poorer than a fresh dry run's.
func (r *alikeResults) reusableCandidates() []preemption.Candidate {
	if r == nil || len(r.candidates) == 0 || len(r.candidates)*2 < r.found {
		return nil
	}
	return r.candidates
}

// keepCandidates keeps a dry run's candidates.
func (r *alikeResults) keepCandidates(candidates []preemption.Candidate) {
	if r != nil {
		r.candidates, r.found = slices.Clone(candidates), len(candidates)
	}
}
