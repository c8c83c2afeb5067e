package command

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/policy"
	"github.com/rlserver/rlserver/status"
)

// Env is what the commands answered here (Cmd.Run) reach beyond their
// arguments: the keyspace's backend, the capabilities the edge was built
// with, and the scripts. A nil capability is one the server lacks: its
// commands answer as a server without it does. The edge makes one Env
// per server, sets its fields before serving, and never changes them.
type Env struct {
	Backend     Keyspace
	Policies    Policies    // RL.POLICY, RL.CHECK
	Persistence Persistence // SAVE, BGSAVE, LASTSAVE, SHUTDOWN
	Cluster     Cluster     // RL.CLUSTER, ROLE
	Slots       Slots       // the Redis Cluster protocol (CLUSTER ...), RL.CLUSTER GROUPS and MOVES
	GroupAdder  GroupAdder  // RL.CLUSTER ADDGROUP
	SlotMover   SlotMover   // RL.CLUSTER MOVE and REBALANCE
	Scanner     Scanner     // SCAN, KEYS, RANDOMKEY
	Live        LiveEngine  // scripts run on the engine's live state (live.go)

	scripts   atomic.Pointer[Scripts] // made on first use
	busyAfter atomic.Int64            // busy-reply-threshold, ns
	scriptMem atomic.Int64            // each script run's memory limit, bytes; 0: none
}

// Keyspace is what the commands need of the backend: running requests,
// counting keys (DBSIZE) and removing them all (FLUSHALL).
type Keyspace interface {
	Backend
	Flush(ctx context.Context) error
}

// Policies is what the policy commands need from a backend.
type Policies interface {
	// PolicyStore is the policies in force on this node (RL.POLICY GET
	// and LIST, INFO, metrics); nil when the backend keeps none.
	PolicyStore() *policy.Store
	// SetPolicy adds or replaces a policy; DelPolicy removes one and
	// reports whether it existed. Replicated backends apply them through
	// the log.
	SetPolicy(ctx context.Context, p *policy.Policy) error
	DelPolicy(ctx context.Context, name string) (bool, error)
}

// Persistence is what the persistence commands need from the snapshots.
type Persistence interface {
	// Save writes a snapshot of the state as it is now and returns once it
	// is durable (SAVE).
	Save(ctx context.Context) error
	// BackgroundSave starts a save and returns at once; false means a save
	// is already running and nothing was started (BGSAVE).
	BackgroundSave() bool
	// LastSave is the time of the last successful save; the start-up time
	// before the first (LASTSAVE).
	LastSave() time.Time
	// Shutdown saves first when save is true (an error means it failed and
	// nothing stops), then makes the process stop gracefully, with a last
	// save unless save is false (SHUTDOWN).
	Shutdown(ctx context.Context, save bool) error
}

// Cluster is what the cluster commands (RL.CLUSTER, ROLE, INFO's
// replication section) need from a replicated backend.
type Cluster interface {
	// ClusterStatus is this node's view of the cluster.
	ClusterStatus() status.Cluster
	// Join adds a voting member with its Raft address.
	Join(ctx context.Context, id, raftAddr string) error
	// Remove removes a member.
	Remove(ctx context.Context, id string) error
	// Digest hashes the replicated state at the last applied entry; nodes
	// that applied the same index report the same digest.
	Digest(ctx context.Context) (appliedIndex uint64, digest string, err error)
}

// Slots is what the Redis Cluster protocol's commands need from a
// backend whose keyspace is split into hash slots (--groups).
type Slots interface {
	// Topology is the slot map with each range's owner.
	Topology() status.Topology
	// CountKeysInSlot and KeysInSlot answer CLUSTER COUNTKEYSINSLOT and
	// GETKEYSINSLOT from this node's replica of the slot's group.
	CountKeysInSlot(ctx context.Context, slot int) (int, error)
	KeysInSlot(ctx context.Context, slot int, count int) ([]string, error)
}

// GroupAdder is what RL.CLUSTER ADDGROUP needs from a sharded backend.
type GroupAdder interface {
	AddGroup(ctx context.Context) (uint32, error)
}

// SlotMover is what RL.CLUSTER MOVE and REBALANCE need from a sharded
// backend.
type SlotMover interface {
	MoveSlots(ctx context.Context, start, end int, target uint32) (uint64, error)
	// StartRebalance starts moving slots in the background until the
	// groups are balanced; false when a rebalance already runs here.
	StartRebalance() bool
}

// Scanner is what SCAN, KEYS and RANDOMKEY need from a backend: a walk
// over the keys it serves (engine.Engine.Scan's cursor and guarantee).
type Scanner interface {
	// Scan calls fn with each live key from cursor on, at least count
	// of them when that many remain, and returns the cursor to continue
	// from: 0 when the walk is done.
	Scan(ctx context.Context, cursor uint64, count int, fn func(key []byte, k engine.Kind)) (uint64, error)
}

// policies returns the backend's policies, or nil when it keeps none (no
// Policies, or one without a store).
func (e *Env) policies() Policies {
	if e.Policies == nil || e.Policies.PolicyStore() == nil {
		return nil
	}
	return e.Policies
}

// Scripts returns the server's scripts, made on first use.
func (e *Env) Scripts() *Scripts {
	if st := e.scripts.Load(); st != nil {
		return st
	}
	st := NewScripts(e.Backend, e.scriptMem.Load())
	if e.Live != nil {
		st.shards = e.Live.Shards()
	}
	if !e.scripts.CompareAndSwap(nil, st) {
		st.Stop()
		return e.scripts.Load()
	}
	return st
}

// CachedScripts counts the scripts in the cache (INFO memory's
// number_of_cached_scripts); 0 before the first script.
func (e *Env) CachedScripts() int {
	if st := e.scripts.Load(); st != nil {
		return st.cache.Len()
	}
	return 0
}

// StopScripts stops every script run (a script's writes are not applied
// until it ends: stopping one loses nothing acknowledged).
func (e *Env) StopScripts() {
	if st := e.scripts.Load(); st != nil {
		st.Stop()
	}
}

// SetBusyAfter sets busy-reply-threshold: a script running longer makes
// the commands on its keys answer BUSY.
func (e *Env) SetBusyAfter(d time.Duration) { e.busyAfter.Store(int64(d)) }

// ScriptMemory is the memory limit of each script run, bytes (0: none).
func (e *Env) ScriptMemory() int64 { return e.scriptMem.Load() }

// SetScriptMemory bounds each script run's memory, from the next run on.
func (e *Env) SetScriptMemory(n int64) {
	e.scriptMem.Store(n)
	if st := e.scripts.Load(); st != nil {
		st.SetMemoryLimit(n)
	}
}

// Busy reports whether a script that runs past busy-reply-threshold
// holds one of cmd's keys in args: the command then answers BUSY. While
// none does, it costs one atomic load or two.
func (e *Env) Busy(cmd *Cmd, args [][]byte) bool {
	st := e.scripts.Load()
	if st == nil || !st.AnyBusy() {
		return false
	}
	if st.liveBusy.Load() != 0 && !allowsBusy(cmd, args) {
		// A script on live state holds its shards as Redis's holds the
		// server: every command but those Redis lets through a busy
		// script (allow_busy: SCRIPT KILL, SHUTDOWN, AUTH, HELLO, MULTI,
		// ...) answers BUSY, as Redis's clients expect.
		return true
	}
	return st.Busy(args, cmd.KeyPositions(args))
}

// allowsBusy reports whether cmd (or its subcommand in args) runs while a
// script is busy, as Redis's allow_busy commands do.
func allowsBusy(cmd *Cmd, args [][]byte) bool {
	if cmd.HasFlag("allow_busy") {
		return true
	}
	if len(cmd.Subcommands) == 0 || len(args) < 2 {
		return false
	}
	sub := cmd.Sub(appendLower(nil, args[1]))
	return sub != nil && sub.HasFlag("allow_busy")
}

// do1 runs one request through the backend (kv.Do).
func (e *Env) do1(req engine.Request) (engine.Result, error) {
	res := make([]engine.Result, 1)
	err := e.Backend.Do(context.Background(), []engine.Request{req}, res)
	return res[0], err
}

// Call is one command answered at once (Cmd.Run): what it reaches and
// where its reply goes. The edge keeps one per connection, Resets it
// before each command and writes its reply: Err, or W's bytes.
type Call struct {
	Env    *Env
	Txn    *Txn      // the connection's transaction
	W      kv.Writer // the reply, in the connection's protocol
	Err    string    // an error reply instead of W's
	Failed bool      // W holds an error reply (a script's), for the counters
	Quit   bool      // the connection closes once the reply is written (SHUTDOWN)
}

// Reset readies x for the next command, replying in RESP3 or not.
func (x *Call) Reset(resp3 bool) {
	x.W.B = x.W.B[:0]
	x.W.RESP3 = resp3
	x.Err, x.Failed, x.Quit = "", false, false
}

// fail makes the reply the error text.
func (x *Call) fail(text string) { x.Err = text }

// okOr replies +OK, or the error text when there is one.
func (x *Call) okOr(text string) {
	if text != "" {
		x.Err = text
		return
	}
	x.W.OK()
}

// write replies a script's or a transaction's outcome.
func (x *Call) write(o Outcome) {
	if o.Err != "" {
		x.Err = o.Err
		return
	}
	x.W.B = append(x.W.B, o.Reply...)
	x.Failed = o.Failed
}

// ScriptRun is how the connection's scripts run now (EvalBatch).
func (x *Call) ScriptRun() Run { return x.run() }

// run is how the connection's scripts and transactions run now.
func (x *Call) run() Run {
	return Run{RESP3: x.W.RESP3, BusyAfter: time.Duration(x.Env.busyAfter.Load()), Sharded: x.Env.Slots != nil}
}

// verbatim writes a text reply (INFO-like): a verbatim string of format
// txt in RESP3, a bulk string in RESP2.
func verbatim(w *kv.Writer, s string) {
	if !w.RESP3 {
		w.BulkString(s)
		return
	}
	w.B = append(w.B, '=')
	w.B = strconv.AppendInt(w.B, int64(len(s)+4), 10)
	w.B = append(w.B, "\r\ntxt:"...)
	w.B = append(w.B, s...)
	w.B = append(w.B, '\r', '\n')
}
