package policy

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rlserver/rlserver/engine"
)

// Store is the set of policies in force. Reads load an atomic pointer to
// an immutable set and never block; writes are serialized and replace the
// set (copy on write: policies change rarely, checks constantly).
//
// It also counts decisions per policy (Record, Stats) for INFO and the
// metrics. The counters are not replicated state: each node counts what
// it answered. A policy's counters survive its redefinition and go with
// its deletion.
type Store struct {
	set     atomic.Pointer[set]
	mu      sync.Mutex    // serializes writers
	changes atomic.Uint64 // writes so far, for the snapshot saver
}

// set is one immutable version of the policies.
type set struct {
	byName map[string]*entry
	sorted []*entry // by name
}

type entry struct {
	p *Policy
	c *counters // shared by every version while the name is defined
}

type counters struct {
	allowed, denied atomic.Int64
}

// NewStore returns an empty store.
func NewStore() *Store {
	s := &Store{}
	s.set.Store(&set{byName: map[string]*entry{}})
	return s
}

// Get returns the policy named name.
func (s *Store) Get(name []byte) (*Policy, bool) {
	e, ok := s.set.Load().byName[string(name)]
	if !ok {
		return nil, false
	}
	return e.p, true
}

// Len is the number of policies.
func (s *Store) Len() int { return len(s.set.Load().sorted) }

// List returns the policies sorted by name.
func (s *Store) List() []*Policy {
	st := s.set.Load()
	out := make([]*Policy, len(st.sorted))
	for i, e := range st.sorted {
		out[i] = e.p
	}
	return out
}

// Defs returns every definition (Policy.Words), sorted by name: what
// snapshots keep.
func (s *Store) Defs() [][]string {
	st := s.set.Load()
	out := make([][]string, len(st.sorted))
	for i, e := range st.sorted {
		out[i] = e.p.Words()
	}
	return out
}

// Changes counts the writes to the store (Set, Del, Replace) since it was
// made; equal counts mean nothing changed.
func (s *Store) Changes() uint64 { return s.changes.Load() }

// Set adds or replaces p. A new name beyond MaxPolicies is ErrTooMany.
func (s *Store) Set(p *Policy) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.set.Load()
	e, exists := old.byName[p.Name]
	if !exists && len(old.sorted) >= MaxPolicies {
		return ErrTooMany
	}
	c := &counters{}
	if exists {
		c = e.c
	}
	next := make(map[string]*entry, len(old.byName)+1)
	for k, v := range old.byName {
		next[k] = v
	}
	next[p.Name] = &entry{p: p, c: c}
	s.publish(next)
	return nil
}

// Del removes the policy named name and reports whether it existed.
func (s *Store) Del(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.set.Load()
	if _, ok := old.byName[name]; !ok {
		return false
	}
	next := make(map[string]*entry, len(old.byName))
	for k, v := range old.byName {
		if k != name {
			next[k] = v
		}
	}
	s.publish(next)
	return true
}

// Replace makes ps the whole set (RL.POLICY LOAD, a snapshot). Names must
// be distinct (ErrDuplicate) and at most MaxPolicies (ErrTooMany); on an
// error nothing changes. Policies that keep their name keep their counters.
func (s *Store) Replace(ps []*Policy) error {
	if len(ps) > MaxPolicies {
		return ErrTooMany
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.set.Load()
	next := make(map[string]*entry, len(ps))
	for _, p := range ps {
		if _, dup := next[p.Name]; dup {
			return ErrDuplicate
		}
		c := &counters{}
		if e, ok := old.byName[p.Name]; ok {
			c = e.c
		}
		next[p.Name] = &entry{p: p, c: c}
	}
	s.publish(next)
	return nil
}

// publish installs a new version; the caller holds s.mu.
func (s *Store) publish(m map[string]*entry) {
	sorted := make([]*entry, 0, len(m))
	for _, e := range m {
		sorted = append(sorted, e)
	}
	slices.SortFunc(sorted, func(a, b *entry) int { return strings.Compare(a.p.Name, b.p.Name) })
	s.set.Store(&set{byName: m, sorted: sorted})
	s.changes.Add(1)
}

// Resolve builds the Scaled engine request of policy name on key taking
// cost units (>= 0); ErrUnknown when no such policy is in force.
func (s *Store) Resolve(name, key []byte, cost int64) (engine.Request, error) {
	e, ok := s.set.Load().byName[string(name)]
	if !ok {
		return engine.Request{}, ErrUnknown
	}
	return e.p.Request(key, cost), nil
}

// Record counts decisions of policy name; a name not in force is ignored.
func (s *Store) Record(name []byte, allowed, denied int64) {
	e, ok := s.set.Load().byName[string(name)]
	if !ok {
		return
	}
	if allowed != 0 {
		e.c.allowed.Add(allowed)
	}
	if denied != 0 {
		e.c.denied.Add(denied)
	}
}

// Stat is one policy's decision counts.
type Stat struct {
	Name            string
	Allowed, Denied int64
}

// Stats returns every policy's counts, sorted by name.
func (s *Store) Stats() []Stat {
	st := s.set.Load()
	out := make([]Stat, len(st.sorted))
	for i, e := range st.sorted {
		out[i] = Stat{Name: e.p.Name, Allowed: e.c.allowed.Load(), Denied: e.c.denied.Load()}
	}
	return out
}

// ParseDefs parses definitions (Policy.Words each), as a snapshot or a log
// entry holds them.
func ParseDefs(defs [][]string) ([]*Policy, error) {
	ps := make([]*Policy, len(defs))
	for i, d := range defs {
		p, err := Parse(d)
		if err != nil {
			return nil, err
		}
		ps[i] = p
	}
	return ps, nil
}

// ResolveInPlace resolves the named requests of reqs in place (see
// ResolveBatch) and reports whether every one resolved. When one did not,
// reqs are partly resolved: give them, with the same names, to
// ResolveBatch, which builds the batch to run (it resolves named requests
// from their name, key, cost and tiers alone). The common case, where
// every policy is in force, allocates nothing.
func (s *Store) ResolveInPlace(reqs []engine.Request, names [][]byte) bool {
	st := s.set.Load()
	for i := range reqs {
		if i >= len(names) {
			break
		}
		if names[i] == nil {
			continue
		}
		e, ok := st.byName[string(names[i])]
		if !ok {
			return false
		}
		r := &reqs[i]
		tiers := r.Tiers
		*r = e.p.Request(r.Key, r.Cost)
		r.Tiers = tiers
	}
	return true
}

// ResolveBatch prepares a batch in which names[i], when not nil, names the
// policy that request i is made from (the request then carries only its
// Key, Cost and Tiers; names may be shorter than reqs: missing names are
// nil). It returns the requests to give the engine, with idx[k] the
// position in reqs of out[k]. A group (Request.Tiers) with a tier whose
// policy is not in force is left out whole: that tier's result is
// ErrUnknown, the others' engine.ErrGroupAborted, and nothing of the group
// is charged. When no request names a policy, out is reqs and idx nil.
func (s *Store) ResolveBatch(reqs []engine.Request, names [][]byte, res []engine.Result) (out []engine.Request, idx []int) {
	if len(names) == 0 {
		return reqs, nil
	}
	st := s.set.Load()
	name := func(i int) []byte {
		if i < len(names) {
			return names[i]
		}
		return nil
	}
	out = make([]engine.Request, 0, len(reqs))
	idx = make([]int, 0, len(reqs))
	for i := 0; i < len(reqs); {
		n := 1
		if t := int(reqs[i].Tiers); t > 1 {
			n = min(t, len(reqs)-i)
		}
		mark := len(out)
		failed := false
		for j := i; j < i+n; j++ {
			r := reqs[j]
			if nm := name(j); nm != nil {
				e, ok := st.byName[string(nm)]
				if !ok {
					failed = true
					res[j] = engine.Result{Err: ErrUnknown}
					continue
				}
				tiers := r.Tiers
				r = e.p.Request(r.Key, r.Cost)
				r.Tiers = tiers
			}
			out = append(out, r)
			idx = append(idx, j)
		}
		if failed {
			for _, j := range idx[mark:] {
				res[j] = engine.Result{Err: engine.ErrGroupAborted}
			}
			out, idx = out[:mark], idx[:mark]
		}
		i += n
	}
	return out, idx
}
