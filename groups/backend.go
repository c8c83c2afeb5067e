package groups

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/rlserver/rlserver/cluster/ownership"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/policy"
	"github.com/rlserver/rlserver/slots"
)

// notServed: the key's slot has no group open on this node (not assigned,
// or this node has not opened its group yet). Nothing was applied.
type notServed struct{}

// moved is a request's result when its slot moved to a group this node
// does not lead (with --cluster-redirect moved): Redis's MOVED.
type moved struct {
	slot int
	addr string
}

func (m moved) Error() string    { return "slot " + strconv.Itoa(m.slot) + " moved to " + m.addr }
func (m moved) WireText() string { return "MOVED " + strconv.Itoa(m.slot) + " " + m.addr }

func movedError(key []byte, addr string) error { return moved{slots.Of(key), addr} }

func (notServed) Error() string    { return "hash slot not served" }
func (notServed) WireText() string { return "CLUSTERDOWN Hash slot not served" }

var errNotServed error = notServed{}

// Do applies a pipeline's requests, each in the group that owns its key's
// slot (doSplit).
func (h *Host) Do(ctx context.Context, reqs []engine.Request, res []engine.Result) error {
	return h.DoPolicies(ctx, reqs, nil, res)
}

// DoPolicies is Do for a batch in which names[i], when not nil, names the
// policy request i is made from (server.Policies). Requests a group
// refused because a move took their slot are sent again where the slot
// went (rerouteRefused).
func (h *Host) DoPolicies(ctx context.Context, reqs []engine.Request, names [][]byte, res []engine.Result) error {
	if len(reqs) == 0 {
		return nil
	}
	if err := h.doSplit(ctx, h.set.Load(), reqs, names, res); err != nil {
		return err
	}
	for i := range res {
		if errors.Is(res[i].Err, ownership.ErrNotOwned) {
			h.rerouteRefused(ctx, reqs, names, res)
			break
		}
	}
	return nil
}

// doSplit applies a batch, each request in the group gs says owns its
// key's slot (Host.target: this node's replica, or with forwarding the
// remote of a group not held here): one call per group, the groups in
// parallel. A group's failure is reported in its own requests' results
// only.
func (h *Host) doSplit(ctx context.Context, gs *groupSet, reqs []engine.Request, names [][]byte, res []engine.Result) error {
	first := h.target(gs, slots.Of(reqs[0].Key))
	same := true
	for i := 1; i < len(reqs) && same; i++ {
		same = h.target(gs, slots.Of(reqs[i].Key)) == first
	}
	if same {
		if first == nil {
			for i := range res {
				res[i] = engine.Result{Err: errNotServed}
			}
			return nil
		}
		return first.do(ctx, reqs, names, res)
	}
	// Split by group, keeping each group's requests in order.
	type part struct {
		t     target
		idx   []int
		reqs  []engine.Request
		names [][]byte
		res   []engine.Result
	}
	parts := map[target]*part{}
	var order []*part
	for i := range reqs {
		t := h.target(gs, slots.Of(reqs[i].Key))
		if t == nil {
			res[i] = engine.Result{Err: errNotServed}
			continue
		}
		p := parts[t]
		if p == nil {
			p = &part{t: t}
			parts[t] = p
			order = append(order, p)
		}
		p.idx = append(p.idx, i)
		p.reqs = append(p.reqs, reqs[i])
		// names may be shorter than reqs (policy.Store.ResolveBatch):
		// the requests past its end name no policy.
		if i < len(names) {
			for len(p.names) < len(p.reqs)-1 {
				p.names = append(p.names, nil)
			}
			p.names = append(p.names, names[i])
		}
	}
	var wg sync.WaitGroup
	for _, p := range order {
		p.res = make([]engine.Result, len(p.reqs))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.t.do(ctx, p.reqs, p.names, p.res); err != nil {
				for k := range p.res {
					p.res[k] = engine.Result{Err: err}
				}
			}
		}()
	}
	wg.Wait()
	for _, p := range order {
		for k, i := range p.idx {
			res[i] = p.res[k]
		}
	}
	return nil
}

func (m *member) do(ctx context.Context, reqs []engine.Request, names [][]byte, res []engine.Result) error {
	if len(names) == 0 {
		return m.node.Do(ctx, reqs, res)
	}
	return m.node.DoPolicies(ctx, reqs, names, res)
}

// Len counts live keys (DBSIZE): with MOVED redirection, of the groups this
// node leads (a cluster client sums DBSIZE over the masters); with
// forwarding, of every group (those not held here through their leaders).
func (h *Host) Len(ctx context.Context) (int, error) {
	total := 0
	err := h.everyGroup(func(m *member, rg *remote) error {
		var n int
		var err error
		switch {
		case m != nil && h.cfg.Redirect == Moved && !m.node.IsLeader():
			return nil
		case m != nil:
			n, err = m.node.Len(ctx)
		case h.cfg.Redirect == Moved:
			return nil
		default:
			n, err = rg.r.Len(ctx)
		}
		total += n
		return err
	})
	if err != nil {
		return 0, err
	}
	return total, nil
}

// Flush removes every key of every group (FLUSHALL), through each group's
// leader (a group not held here through its remote).
func (h *Host) Flush(ctx context.Context) error {
	return h.everyGroup(func(m *member, rg *remote) error {
		if m != nil {
			return m.node.Flush(ctx)
		}
		return rg.r.Flush(ctx)
	})
}

// Usage sums this process's replicas (memlimit.Backend).
func (h *Host) Usage(ctx context.Context) (engine.Usage, error) {
	var u engine.Usage
	for _, m := range h.set.Load().ordered {
		mu, err := m.node.Usage(ctx)
		if err != nil {
			return u, err
		}
		for k, n := range mu.Keys {
			u.Keys[k] += n
		}
		u.Stored += mu.Stored
		u.Charged += mu.Charged
		u.Allocated += mu.Allocated
	}
	return u, nil
}

// CmdWrites sums the data writes applied by the groups held here
// (server.CmdWriter): a parked client's key may be in any of them.
func (h *Host) CmdWrites() uint64 {
	var n uint64
	for _, m := range h.set.Load().ordered {
		n += m.node.CmdWrites()
	}
	return n
}

// MemoryLeader reports whether this node leads a data group: only leaders
// decide to refuse or evict (memlimit.Backend).
func (h *Host) MemoryLeader() bool {
	for _, m := range h.set.Load().ordered {
		if m.node.IsLeader() {
			return true
		}
	}
	return false
}

// SetNoCreate turns the refusal of new keys on or off in the groups this
// node leads.
func (h *Host) SetNoCreate(ctx context.Context, on bool) error {
	var errs []error
	for _, m := range h.set.Load().ordered {
		if m.node.IsLeader() {
			errs = append(errs, m.node.SetNoCreate(ctx, on))
		}
	}
	return errors.Join(errs...)
}

// Evict runs one eviction round in each group this node leads.
func (h *Host) Evict(ctx context.Context, r engine.EvictRange) (int, error) {
	total := 0
	for _, m := range h.set.Load().ordered {
		if !m.node.IsLeader() {
			continue
		}
		n, err := m.node.Evict(ctx, r)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// ExpiredKeys sums the keys the groups' sweeps dropped on this node.
func (h *Host) ExpiredKeys() int64 {
	var n int64
	for _, m := range h.set.Load().ordered {
		n += m.node.ExpiredKeys()
	}
	return n
}

// EvictedKeys sums the keys evicted in the groups on this node.
func (h *Host) EvictedKeys() int64 {
	var n int64
	for _, m := range h.set.Load().ordered {
		n += m.node.EvictedKeys()
	}
	return n
}

// Sweep drops expired keys in every group's replica (cluster.Node.Sweep)
// until ctx ends, including groups opened meanwhile.
func (h *Host) Sweep(ctx context.Context, interval time.Duration, budget int) {
	var wg sync.WaitGroup
	start := func(m *member) {
		wg.Add(1)
		go func() { defer wg.Done(); m.node.Sweep(ctx, interval, budget) }()
	}
	h.sweepMu.Lock()
	h.sweep = start
	for _, m := range h.set.Load().ordered {
		start(m)
	}
	h.sweepMu.Unlock()
	<-ctx.Done()
	h.sweepMu.Lock()
	h.sweep = nil
	h.sweepMu.Unlock()
	wg.Wait()
}

// Policies: every data group keeps the policy table (its batches resolve
// names in their own FSM), so a change is applied to every group, one after
// the other; a change that fails part-way is reported and may be repeated
// (SET, DEL and LOAD are idempotent).

// PolicyStore is the policy table of the lowest group on this node.
func (h *Host) PolicyStore() *policy.Store {
	gs := h.set.Load()
	if len(gs.ordered) == 0 {
		return h.meta.PolicyStore()
	}
	return gs.ordered[0].node.PolicyStore()
}

// SetPolicy adds or replaces a policy in every group.
func (h *Host) SetPolicy(ctx context.Context, p *policy.Policy) error {
	return h.everyGroup(func(m *member, rg *remote) error {
		if m != nil {
			return m.node.SetPolicy(ctx, p)
		}
		return rg.r.SetPolicy(ctx, p)
	})
}

// DelPolicy removes a policy from every group; it reports whether any had it.
func (h *Host) DelPolicy(ctx context.Context, name string) (bool, error) {
	found := false
	err := h.everyGroup(func(m *member, rg *remote) error {
		var ok bool
		var err error
		if m != nil {
			ok, err = m.node.DelPolicy(ctx, name)
		} else {
			ok, err = rg.r.DelPolicy(ctx, name)
		}
		found = found || ok
		return err
	})
	return found, err
}

// ReplacePolicies makes ps the whole policy table of every group.
func (h *Host) ReplacePolicies(ctx context.Context, ps []*policy.Policy) error {
	return h.everyGroup(func(m *member, rg *remote) error {
		if m != nil {
			return m.node.ReplacePolicies(ctx, ps)
		}
		return rg.r.ReplacePolicies(ctx, ps)
	})
}
