package server

import (
	"math"
	"math/bits"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/status"
)

// Per-command statistics (INFO commandstats, errorstats, the Prometheus
// metrics), kept cheap on the hot path:
//
//   - A connection tallies its commands in plain per-connection counters
//     (connStats, indexed by command id) while it runs a pipeline, and adds
//     them to the shared atomics once per pipeline: the shared cache lines
//     are touched once per batch and per distinct command, not per command.
//   - The clock is read once more per pipeline (the end time was read
//     already). The pipeline's time is shared equally among its commands:
//     a command's latency is its batch's time divided by the batch's
//     command count, so the sums add up to the server's busy time, as
//     Redis's usec does. The whole batch's time is also recorded once, as
//     the latency a pipelining client sees.
//   - Nothing is allocated per command.

// numBuckets is the histograms' number of finite bounds
// (status.LatencyBuckets).
const numBuckets = status.NumLatencyBuckets

// bucketOf returns the histogram bucket of a duration: the first bound it
// does not exceed, numBuckets for +Inf.
func bucketOf(ns int64) int {
	if ns <= 1000 {
		return 0
	}
	// Bound i is 1000<<i ns: the smallest i with ns <= 1000<<i.
	return min(bits.Len64(uint64(ns-1)/1000), numBuckets)
}

// histogram counts observations per bucket (not cumulative) with their
// sum, in atomics that are added to once per batch.
type histogram struct {
	counts   [numBuckets + 1]atomic.Int64
	sumNanos atomic.Int64
}

// add records n observations of ns each.
func (h *histogram) add(ns, n int64) {
	h.counts[bucketOf(ns)].Add(n)
	h.sumNanos.Add(ns * n)
}

func (h *histogram) snapshot() status.Histogram {
	out := status.Histogram{Cumulative: make([]uint64, numBuckets)}
	var run uint64
	for i := range h.counts {
		run += uint64(h.counts[i].Load())
		if i < numBuckets {
			out.Cumulative[i] = run
		}
	}
	out.Count = run
	out.SumSeconds = float64(h.sumNanos.Load()) / 1e9
	return out
}

// cmdStats are one command's shared counters.
type cmdStats struct {
	calls    atomic.Int64 // executed (rejected ones excluded, as in Redis)
	allowed  atomic.Int64 // decisions that allowed
	denied   atomic.Int64 // decisions that denied
	failed   atomic.Int64 // executed and answered with an error
	rejected atomic.Int64 // refused before running: arity, auth, ACL, key length
	latency  histogram
}

// connTally is one command's counts within the current pipeline.
type connTally struct {
	calls, allowed, denied, failed, rejected int64
}

// connStats is a connection's tally of the pipeline it is running, and its
// denied keys for RL.TOP. Only the connection's goroutine touches it.
type connStats struct {
	byID    []connTally
	touched []int32 // ids with a non-zero tally
	n       int64   // commands tallied, rejected ones included

	deniedKeys []byte // denied keys of the pipeline, back to back
	deniedEnds []int
	top        localTop // denials not yet in the server's summary (top.go)
}

func (cs *connStats) at(id int) *connTally {
	if id >= len(cs.byID) {
		cs.byID = append(cs.byID, make([]connTally, len(command.All())-len(cs.byID))...)
	}
	t := &cs.byID[id]
	if *t == (connTally{}) {
		cs.touched = append(cs.touched, int32(id))
	}
	cs.n++
	return t
}

// deny remembers a denied key for RL.TOP.
func (cs *connStats) deny(key []byte) {
	if len(key) > topKeyMax {
		key = key[:topKeyMax]
	}
	cs.deniedKeys = append(cs.deniedKeys, key...)
	cs.deniedEnds = append(cs.deniedEnds, len(cs.deniedKeys))
}

// mergeStats adds a connection's pipeline tally to the server's counters.
// elapsed is the pipeline's time, now its end.
func (s *Server) mergeStats(c *client, elapsed time.Duration, now time.Time) {
	cs := &c.st
	if cs.n > 0 {
		share := int64(elapsed) / cs.n
		for _, id := range cs.touched {
			t := &cs.byID[id]
			st := &s.cmdStats[id]
			if t.calls > 0 {
				st.calls.Add(t.calls)
				st.latency.add(share, t.calls)
			}
			if t.allowed > 0 {
				st.allowed.Add(t.allowed)
			}
			if t.denied > 0 {
				st.denied.Add(t.denied)
			}
			if t.failed > 0 {
				st.failed.Add(t.failed)
			}
			if t.rejected > 0 {
				st.rejected.Add(t.rejected)
			}
			*t = connTally{}
		}
		cs.touched = cs.touched[:0]
		cs.n = 0
		s.batchLatency.add(int64(elapsed), 1)
	}
	if len(cs.deniedEnds) > 0 {
		cs.top.addBatch(&s.top, cs.deniedKeys, cs.deniedEnds, now)
		cs.deniedKeys = cs.deniedKeys[:0]
		cs.deniedEnds = cs.deniedEnds[:0]
	}
}

// CommandStats returns the counters of every command called at least once
// (rejected calls included), sorted by name.
func (s *Server) CommandStats() []status.Command {
	var out []status.Command
	for id := range s.cmdStats {
		st := &s.cmdStats[id]
		calls, rejected := st.calls.Load(), st.rejected.Load()
		if calls == 0 && rejected == 0 {
			continue
		}
		out = append(out, status.Command{
			Name: command.All()[id].Name, Calls: calls, Allowed: st.allowed.Load(), Denied: st.denied.Load(),
			Failed: st.failed.Load(), Rejected: rejected, Latency: st.latency.snapshot(),
			Decides: command.All()[id].Decides(),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// BatchLatency is the histogram of whole pipelines' processing times: what
// a client that pipelines waits for, before the reply is written.
func (s *Server) BatchLatency() status.Histogram { return s.batchLatency.snapshot() }

// Counters reads the server's counters since start. ExpiredKeys is the
// total of ExpiredKeys.
func (s *Server) Counters() status.Counters {
	st := &s.Stats
	return status.Counters{
		ConnectionsReceived: st.ConnectionsReceived.Load(),
		RejectedConnections: st.RejectedConnections.Load(),
		CommandsProcessed:   st.CommandsProcessed.Load(),
		ErrorReplies:        st.ErrorReplies.Load(),
		Allowed:             st.Allowed.Load(),
		Denied:              st.Denied.Load(),
		AuthFailures:        st.AuthFailures.Load(),
		ExpiredKeys:         s.ExpiredKeys(),
		ClusterMoved:        st.ClusterMoved.Load(),
		ClusterCrossSlot:    st.ClusterCrossSlot.Load(),
		ClusterDown:         st.ClusterDown.Load(),
	}
}

// ConnectedClients counts the connections being served.
func (s *Server) ConnectedClients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clients)
}

// Started is when the server was made.
func (s *Server) Started() time.Time { return s.started }

// errorStats counts error replies by their code (the first word: ERR,
// WRONGTYPE, NOAUTH...), as Redis's errorstats. The codes come from the
// server's own texts, so they are few; past maxErrorCodes, new codes are
// counted under "OTHER".
type errorStats struct {
	mu    sync.RWMutex
	codes map[string]*atomic.Int64
}

const maxErrorCodes = 128

func (e *errorStats) add(text string) {
	code := command.ErrorCode(text)
	e.mu.RLock()
	n := e.codes[code]
	e.mu.RUnlock()
	if n == nil {
		e.mu.Lock()
		if e.codes == nil {
			e.codes = map[string]*atomic.Int64{}
		}
		if n = e.codes[code]; n == nil {
			if len(e.codes) >= maxErrorCodes {
				code = "OTHER"
			}
			if n = e.codes[code]; n == nil {
				n = new(atomic.Int64)
				e.codes[strings.Clone(code)] = n
			}
		}
		e.mu.Unlock()
	}
	n.Add(1)
}

// ErrorStats returns the error replies sent so far by error code.
func (s *Server) ErrorStats() map[string]int64 {
	s.errStats.mu.RLock()
	defer s.errStats.mu.RUnlock()
	out := make(map[string]int64, len(s.errStats.codes))
	for k, v := range s.errStats.codes {
		out[k] = v.Load()
	}
	return out
}

// usecPerCall is Redis's usec_per_call: the mean in µs, two decimals.
func usecPerCall(sumSeconds float64, calls int64) float64 {
	if calls == 0 {
		return 0
	}
	return math.Round(sumSeconds*1e6/float64(calls)*100) / 100
}

// opsSampler keeps the last opsSamples command counts, one per
// opsSampleEvery, for INFO's instantaneous_ops_per_sec (Redis samples the
// same way: 16 samples, 100 ms apart).
type opsSampler struct {
	mu    sync.Mutex
	at    [opsSamples]time.Time
	count [opsSamples][3]int64 // commands, allowed, denied
	next  int
	n     int
	once  sync.Once
	done  chan struct{}
}

const (
	opsSamples     = 16
	opsSampleEvery = 100 * time.Millisecond
)

// startSampler starts the sampling goroutine once; Shutdown stops it.
func (s *Server) startSampler() {
	s.ops.once.Do(func() {
		s.ops.done = make(chan struct{})
		go func() {
			t := time.NewTicker(opsSampleEvery)
			defer t.Stop()
			for {
				select {
				case <-s.ops.done:
					return
				case now := <-t.C:
					s.ops.mu.Lock()
					s.ops.at[s.ops.next] = now
					s.ops.count[s.ops.next] = [3]int64{s.Stats.CommandsProcessed.Load(), s.Stats.Allowed.Load(), s.Stats.Denied.Load()}
					s.ops.next = (s.ops.next + 1) % opsSamples
					s.ops.n = min(s.ops.n+1, opsSamples)
					s.ops.mu.Unlock()
				}
			}
		}()
	})
}

func (s *Server) stopSampler() {
	s.ops.once.Do(func() {}) // a server that never served starts none
	if s.ops.done != nil {
		close(s.ops.done)
	}
}

// instantaneous returns the commands, allowed and denied decisions per
// second over the sampled window (up to 1.6 s).
func (s *Server) instantaneous() [3]float64 {
	s.ops.mu.Lock()
	defer s.ops.mu.Unlock()
	var out [3]float64
	if s.ops.n < 2 {
		return out
	}
	newest := (s.ops.next - 1 + opsSamples) % opsSamples
	oldest := (s.ops.next - s.ops.n + opsSamples) % opsSamples
	secs := s.ops.at[newest].Sub(s.ops.at[oldest]).Seconds()
	if secs <= 0 {
		return out
	}
	for i := range out {
		out[i] = float64(s.ops.count[newest][i]-s.ops.count[oldest][i]) / secs
	}
	return out
}

// MaxClients is the current client limit (CONFIG SET maxclients).
func (s *Server) MaxClients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.MaxClients
}

// CONFIG RESETSTAT. The counters themselves only grow: /metrics exports
// them as Prometheus counters, which must never go backwards (a reset
// would read as a process restart, and rate() would jump). RESETSTAT
// instead records their values as a base, and INFO reports the difference,
// as Redis's INFO does after its reset. It resets what Redis's
// resetServerStats, resetCommandTableStats and resetErrorTableStats reset:
// connections received, rejected connections, commands processed, net
// input and output bytes, error replies, expired and evicted keys (and
// rlserver's allowed and denied decisions, its hits and misses),
// commandstats, errorstats and the instantaneous rates. Redis keeps the
// acl_access_denied_* counters, and so does rlserver.
type statsBase struct {
	mu                                sync.Mutex
	connections, rejected, commands   int64
	netIn, netOut, errors             int64
	expired, evicted, allowed, denied int64
	moved, crossSlot, clusterDown     int64
	cmds                              []cmdBase // by command id; nil: never reset
	errs                              map[string]int64
}

type cmdBase struct {
	calls, allowed, denied, failed, rejected, sumNanos int64
}

// resetStats makes INFO's counters start again from zero.
func (s *Server) resetStats() {
	b := &s.base
	b.mu.Lock()
	defer b.mu.Unlock()
	st := &s.Stats
	b.connections = st.ConnectionsReceived.Load()
	b.rejected = st.RejectedConnections.Load()
	b.commands = st.CommandsProcessed.Load()
	b.netIn = st.NetInputBytes.Load()
	b.netOut = st.NetOutputBytes.Load()
	b.errors = st.ErrorReplies.Load()
	b.moved = st.ClusterMoved.Load()
	b.crossSlot = st.ClusterCrossSlot.Load()
	b.clusterDown = st.ClusterDown.Load()
	b.expired = s.ExpiredKeys()
	b.evicted = s.EvictedKeys()
	b.allowed = st.Allowed.Load()
	b.denied = st.Denied.Load()
	b.cmds = make([]cmdBase, len(s.cmdStats))
	for id := range s.cmdStats {
		cs := &s.cmdStats[id]
		b.cmds[id] = cmdBase{calls: cs.calls.Load(), allowed: cs.allowed.Load(), denied: cs.denied.Load(),
			failed: cs.failed.Load(), rejected: cs.rejected.Load(), sumNanos: cs.latency.sumNanos.Load()}
	}
	b.errs = s.ErrorStats()
	s.ops.mu.Lock()
	s.ops.n = 0
	s.ops.mu.Unlock()
}

// statsSinceReset returns INFO's view of Stats: each counter RESETSTAT
// resets less its value then (ExpiredKeys holds the total of
// Server.ExpiredKeys); the others as they are.
func (s *Server) statsSinceReset() *Stats {
	b := &s.base
	b.mu.Lock()
	defer b.mu.Unlock()
	st := &s.Stats
	out := &Stats{}
	out.ConnectionsReceived.Store(st.ConnectionsReceived.Load() - b.connections)
	out.RejectedConnections.Store(st.RejectedConnections.Load() - b.rejected)
	out.CommandsProcessed.Store(st.CommandsProcessed.Load() - b.commands)
	out.NetInputBytes.Store(st.NetInputBytes.Load() - b.netIn)
	out.NetOutputBytes.Store(st.NetOutputBytes.Load() - b.netOut)
	out.ErrorReplies.Store(st.ErrorReplies.Load() - b.errors)
	out.ExpiredKeys.Store(s.ExpiredKeys() - b.expired)
	out.Allowed.Store(st.Allowed.Load() - b.allowed)
	out.Denied.Store(st.Denied.Load() - b.denied)
	out.ClusterMoved.Store(st.ClusterMoved.Load() - b.moved)
	out.ClusterCrossSlot.Store(st.ClusterCrossSlot.Load() - b.crossSlot)
	out.ClusterDown.Store(st.ClusterDown.Load() - b.clusterDown)
	out.AuthFailures.Store(st.AuthFailures.Load())
	out.ACLDeniedCmd.Store(st.ACLDeniedCmd.Load())
	out.ACLDeniedKey.Store(st.ACLDeniedKey.Load())
	return out
}

// evictedSinceReset is INFO's evicted_keys.
func (s *Server) evictedSinceReset() int64 {
	s.base.mu.Lock()
	defer s.base.mu.Unlock()
	return s.EvictedKeys() - s.base.evicted
}

// commandStatsSinceReset is CommandStats as INFO commandstats reports it:
// counts and latency sums since the last RESETSTAT (the histogram's
// buckets are left as they are: INFO does not show them).
func (s *Server) commandStatsSinceReset() []status.Command {
	all := s.CommandStats()
	s.base.mu.Lock()
	defer s.base.mu.Unlock()
	if s.base.cmds == nil {
		return all
	}
	byName := make(map[string]cmdBase, len(all))
	for id, b := range s.base.cmds {
		byName[command.All()[id].Name] = b
	}
	out := all[:0]
	for _, cs := range all {
		b := byName[cs.Name]
		cs.Calls -= b.calls
		cs.Allowed -= b.allowed
		cs.Denied -= b.denied
		cs.Failed -= b.failed
		cs.Rejected -= b.rejected
		cs.Latency.SumSeconds -= float64(b.sumNanos) / 1e9
		if cs.Calls == 0 && cs.Rejected == 0 {
			continue
		}
		out = append(out, cs)
	}
	return out
}

// errorStatsSinceReset is ErrorStats as INFO errorstats reports it.
func (s *Server) errorStatsSinceReset() map[string]int64 {
	all := s.ErrorStats()
	s.base.mu.Lock()
	defer s.base.mu.Unlock()
	for code, n := range all {
		if n -= s.base.errs[code]; n > 0 {
			all[code] = n
		} else {
			delete(all, code)
		}
	}
	return all
}
