// Package metrics exports rlserver's state to Prometheus: a collector that
// reads the server's counters, the engine's key counts, the snapshot saver
// and the Raft node when a scrape asks, so nothing is done between scrapes
// and the request path only keeps the plain counters it keeps anyway
// (server/stats.go).
//
// Names follow Prometheus's conventions: rlserver_ prefix, _total for
// counters, base units (_seconds, _bytes). Label sets are bounded: command
// names come from the command table, error codes from the server's own
// texts (at most 128), the top denied keys are at most TopKeys, and data
// groups at most MaxGroups.
package metrics

import (
	"context"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/offheap"
	"github.com/rlserver/rlserver/memlimit"
	"github.com/rlserver/rlserver/policy"
	"github.com/rlserver/rlserver/status"
)

// Sources are what the metrics read. Server and Memory are required; the
// rest may be nil.
type Sources struct {
	Server      Server
	Memory      Memory
	Engine      KeyCounter  // keys per kind: this replica's engine
	Persistence Persistence // standalone snapshots
	Cluster     Cluster     // the Raft node in cluster mode
	Groups      Groups      // a sharded node's data groups (--groups); nil otherwise
	Version     string
	// TopKeys is how many of the most denied keys are exported with their
	// key as a label (default 10; negative: none).
	TopKeys int
}

// Server is what the metrics read from the command layer
// (*server.Server).
type Server interface {
	Counters() status.Counters
	// CommandStats are the counters of the commands called so far.
	CommandStats() []status.Command
	// BatchLatency is the histogram of whole pipelines' processing times.
	BatchLatency() status.Histogram
	// ErrorStats counts the error replies sent by error code.
	ErrorStats() map[string]int64
	ConnectedClients() int
	MaxClients() int
	// TopDenied returns the n keys denied most in the recent past.
	TopDenied(n int) []status.TopKey
	// PolicyStats counts RL.CHECK decisions per named policy.
	PolicyStats() []policy.Stat
}

// Memory is what the metrics read from the maxmemory controller.
type Memory interface {
	// UsedMemory is used memory as maxmemory counts it; ok is false when
	// the engine's part could not be read.
	UsedMemory(ctx context.Context) (used int64, u engine.Usage, ok bool)
	// MaxMemory is the limit (0: none) and the eviction policy's name.
	MaxMemory() (int64, memlimit.EvictionPolicy)
	EvictedKeys() int64
	// RefusingNewKeys reports whether key creation is refused now.
	RefusingNewKeys() bool
}

// KeyCounter counts the stored keys per kind (*engine.Engine).
type KeyCounter interface {
	Usage(ctx context.Context) (engine.Usage, error)
}

// Persistence is what the metrics read from standalone snapshots.
type Persistence interface {
	PersistenceStatus() status.Persistence
	// StopWrites reports whether write commands are refused because the
	// last save failed.
	StopWrites() bool
}

// Cluster is what the metrics read from a Raft node (*cluster.Node).
type Cluster interface {
	ClusterStatus() status.Cluster
	RaftSnapshotStatus() status.RaftSnapshots
}

// Groups is what the metrics read from a sharded node (*groups.Host).
type Groups interface {
	Topology() status.Topology
}

// MaxGroups bounds the group label: the slot directory holds at most 1024
// data groups, and a scrape exports no more than that.
const MaxGroups = 1024

// Handler returns the /metrics handler of a registry holding rlserver's
// collector and the standard Go runtime and process collectors.
func Handler(src Sources) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(New(src),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Collector reads rlserver's state on each scrape.
type Collector struct {
	src Sources
}

// New returns the collector of src.
func New(src Sources) *Collector {
	if src.TopKeys == 0 {
		src.TopKeys = 10
	}
	return &Collector{src: src}
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("rlserver_"+name, help, labels, nil)
}

var (
	dBuild       = desc("build_info", "rlserver's version, always 1.", "version", "go_version")
	dCommands    = desc("commands_total", "Commands run, by command and outcome: allowed or denied (limiter decisions: only limiter commands have these two series), ok (other successes), error (error replies, including commands refused before running).", "command", "outcome")
	dCmdLatency  = desc("command_duration_seconds", "Server time per command: each pipeline's processing time shared equally among its commands.", "command")
	dPipeLatency = desc("pipeline_duration_seconds", "Processing time of whole pipelines (batches of commands read together), before the replies are written.")
	dErrors      = desc("error_replies_total", "Error replies sent, by error code (the first word: ERR, WRONGTYPE, NOAUTH...).", "code")
	dClients     = desc("connected_clients", "Client connections being served.")
	dMaxClients  = desc("max_clients", "The client connection limit (maxclients).")
	dConnsRecv   = desc("connections_received_total", "Client connections accepted.")
	dConnsRej    = desc("connections_rejected_total", "Client connections refused: maxclients reached, or protected mode.")
	dAuthFail    = desc("auth_failures_total", "Failed AUTH and HELLO ... AUTH attempts.")
	dRedirects   = desc("cluster_redirects_total", "Keyed commands refused by slot routing (cluster mode with --groups), by reply: moved, crossslot, clusterdown.", "reply")
	dKeys        = desc("keys", "Keys stored, by state kind: counted by the tables as keys come and go, so a scrape costs no walk; keys whose state became empty count until the sweep drops them (within seconds).", "kind")
	dExpired     = desc("expired_keys_total", "Keys dropped by the background sweep once their state was empty again (keys dropped on access are not counted).")
	dTop         = desc("top_denied_keys", "Denials of the keys denied most in the recent past (decayed with a one-minute half-life), as RL.TOP lists them.", "key")
	dPolicy      = desc("policy_decisions_total", "RL.CHECK decisions per policy on this node: allowed (checks in which every tier allowed, so this one was charged unless COST 0) or denied (checks this policy's tier rejected).", "policy", "outcome")

	dSnapSaves    = desc("snapshot_saves_total", "Snapshot saves, by result (ok or failed).", "result")
	dSnapDuration = desc("snapshot_last_duration_seconds", "Duration of the last successful snapshot save.")
	dSnapTime     = desc("snapshot_last_success_timestamp_seconds", "Unix time of the last successful snapshot save (the start-up time before the first).")
	dSnapAge      = desc("snapshot_age_seconds", "Seconds since the last successful snapshot save.")
	dSnapBytes    = desc("snapshot_last_size_bytes", "File size of the last successful snapshot.")
	dSnapKeys     = desc("snapshot_last_keys", "Keys in the last successful snapshot.")
	dSnapChanges  = desc("snapshot_changes_since_last_save", "Writes to limiter state since the last successful save started.")
	dSnapRunning  = desc("snapshot_in_progress", "1 while a background snapshot save runs.")
	dSnapLastOK   = desc("snapshot_last_save_ok", "1 when the last snapshot save succeeded.")
	dSnapRefusing = desc("snapshot_refusing_writes", "1 while write commands get MISCONF because the last snapshot save failed and stop-writes-on-bgsave-error is yes.")

	dRaftState   = desc("raft_state", "1 for this node's current Raft state, 0 for the others.", "state")
	dRaftTerm    = desc("raft_term", "Current Raft term.")
	dRaftCommit  = desc("raft_commit_index", "Highest log index known to be committed.")
	dRaftApplied = desc("raft_applied_index", "Highest log index applied to this replica's state.")
	dRaftLast    = desc("raft_last_log_index", "Last log index stored on this node.")
	dRaftSnap    = desc("raft_last_snapshot_index", "Log index of the last Raft snapshot.")
	dRaftLag     = desc("raft_apply_lag", "Committed log entries not yet applied here (commit index minus applied index).")
	dRaftLeaders = desc("raft_leader_changes_total", "Leader changes this node observed (elections, hand-offs, losses of the leader).")
	dRaftLate    = desc("raft_late_forwards_total", "Forwarded commands this node refused as leader because they reached it after their deadline (never appended).")
	dRaftDisk    = desc("raft_disk_failed", "1 while a Raft log write has failed and no disk probe has succeeded since: the node does not stand for election.")
	dRaftStalls  = desc("raft_disk_stalls_total", "Raft log and stable store writes seen in progress past --raft-disk-stall-timeout (a leader then exits).")
	dRaftLogSync = desc("raft_log_fsyncs_total", "fdatasyncs of the process's Raft log, which every group it hosts shares.")
	dRaftDiskErr = desc("raft_disk_write_errors_total", "Failed Raft log and stable store writes (disk full, I/O errors).")
	dRaftHasLdr  = desc("raft_has_leader", "1 while this node knows a leader.")
	dRaftPeers   = desc("raft_peers", "Members in the Raft configuration.")
	dRemoved     = desc("cluster_removed", "1 once this node was removed from the cluster's configuration: it refuses commands until it is stopped.")
)

var raftStates = []string{"follower", "candidate", "leader", "shutdown"}

// Raft snapshots (cluster mode).
var (
	dRaftSnapTaken    = desc("raft_snapshots_taken_total", "Raft snapshots this node wrote, by result (ok or failed).", "result")
	dRaftSnapRestored = desc("raft_snapshots_restored_total", "Raft snapshots restored into this node's state: at start-up, or sent by the leader to a follower too far behind.")
	dRaftSnapDuration = desc("raft_snapshot_last_duration_seconds", "Duration of this node's last Raft snapshot, from the capture of the state to the end of the write.")
	dRaftSnapBytes    = desc("raft_snapshot_last_size_bytes", "Size of this node's last Raft snapshot.")
	dRaftSnapTime     = desc("raft_snapshot_last_success_timestamp_seconds", "Unix time of this node's last Raft snapshot (the start-up time before the first).")
	dRaftSnapAge      = desc("raft_snapshot_age_seconds", "Seconds since this node's last Raft snapshot (since start-up before the first).")
	dRaftRestoreDur   = desc("raft_snapshot_last_restore_duration_seconds", "Duration of the last Raft snapshot restore (absent before the first).")
)

// Data groups (a sharded node, --groups).
var (
	dGroupLeader  = desc("group_leader", "1 when this node leads the data group, 0 otherwise.", "group")
	dGroupSlots   = desc("group_slots", "Hash slots the data group owns in the slot directory.", "group")
	dGroupKeys    = desc("group_keys", "Keys stored in this node's replica of the data group (records, as rlserver_keys counts them).", "group")
	dGroupApplied = desc("group_applied_index", "Highest log index of the data group applied to this node's replica.", "group")
	dGroupCommit  = desc("group_commit_index", "Highest log index of the data group this node knows to be committed.", "group")
	dGroupLag     = desc("group_lag_entries", "Log entries of the data group stored on this node but not yet applied here (last log index minus applied index).", "group")
	dSlotsAssign  = desc("cluster_slots_assigned", "Hash slots (of 16384) the slot directory assigns to a data group.")
	dEpoch        = desc("cluster_epoch", "The slot directory's epoch, raised by every change of groups, slots or node addresses.")

	dMoveRunning = desc("cluster_move_in_progress", "1 while a slot move is in progress (begun or committed, not yet released); at most one runs at a time.")
	dMoveKeys    = desc("cluster_move_keys", "Records the target group imported so far for the slot move in progress, as this node's replica of the target counts them (0 on a node that does not host the target, and with no move in progress).")
	dMoveSlots   = desc("cluster_move_slots", "Hash slots in the slot move in progress (0 with none).")
	dMovesDone   = desc("cluster_moves_finished", "Finished (released) slot moves the slot directory lists: it keeps the last 16, so this is not a running total.")
	dMoveLastDur = desc("cluster_last_move_duration_seconds", "Duration of the last finished slot move, from its begin to its release in the directory's log (absent before the first).")
	dRebalancing = desc("cluster_rebalancing", "1 while a rebalance started on this node (RL.CLUSTER REBALANCE) runs.")

	dUnderReplicated = desc("cluster_groups_under_replicated", "Groups with fewer voters on nodes not dead than the replication factor (or than the nodes available, when fewer); only with --replicas.")
	dReplicaMoving   = desc("cluster_replica_moves_in_progress", "Groups adding a replica (a learner recorded in the directory); only with --replicas.")
	dReplicaMoved    = desc("cluster_replica_moves_finished_total", "Replicas added since the cluster began (learners promoted to voters); only with --replicas.")
	dNodesDead       = desc("cluster_nodes_dead", "Nodes the meta group's leader recorded as dead (unreachable past --node-dead-after); only with --replicas.")
	dNodesDraining   = desc("cluster_nodes_draining", "Nodes being drained by RL.CLUSTER REMOVE; only with --replicas.")
)

func describeGroups(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dGroupLeader, dGroupSlots, dGroupKeys, dGroupApplied, dGroupCommit, dGroupLag,
		dSlotsAssign, dEpoch, dMoveRunning, dMoveKeys, dMoveSlots, dMovesDone, dMoveLastDur, dRebalancing,
		dUnderReplicated, dReplicaMoving, dReplicaMoved, dNodesDead, dNodesDraining} {
		ch <- d
	}
}

// collectMoves exports the slot directory's moves. The move in progress
// and the last finished one are found by state and end time, not by their
// place in t.Moves.
func collectMoves(ch chan<- prometheus.Metric, t status.Topology) {
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	var cur, last *status.Move
	finished := 0
	for i, m := range t.Moves {
		switch {
		case m.State != "released":
			cur = &t.Moves[i]
		default:
			finished++
			if last == nil || m.Ended > last.Ended {
				last = &t.Moves[i]
			}
		}
	}
	keys, slots := 0, 0
	if cur != nil {
		keys, slots = cur.Keys, cur.End-cur.Start+1
	}
	gauge(dMoveRunning, b2f(cur != nil))
	gauge(dMoveKeys, float64(keys))
	gauge(dMoveSlots, float64(slots))
	gauge(dMovesDone, float64(finished))
	if last != nil {
		gauge(dMoveLastDur, float64(max(last.Ended-last.Began, 0))/1e9)
	}
	gauge(dRebalancing, b2f(t.Rebalancing))
	if p := t.Placement; p != nil {
		gauge(dUnderReplicated, float64(p.UnderReplicated))
		gauge(dReplicaMoving, float64(p.MovesInProgress))
		ch <- prometheus.MustNewConstMetric(dReplicaMoved, prometheus.CounterValue, float64(p.MovesFinished))
		gauge(dNodesDead, float64(p.DeadNodes))
		gauge(dNodesDraining, float64(p.DrainingNodes))
	}
}

// collectGroups exports every data group of the directory (at most
// MaxGroups). The replica series (keys, indexes, lag) exist only for the
// groups this node hosts (Role set): a group it has not opened yet has no
// replica to measure, and zeros would read as a replica that fell behind.
func collectGroups(ch chan<- prometheus.Metric, g Groups) {
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	t := g.Topology()
	assigned := 0
	for _, r := range t.Ranges {
		assigned += r.End - r.Start + 1
	}
	gauge(dSlotsAssign, float64(assigned))
	gauge(dEpoch, float64(t.Epoch))
	collectMoves(ch, t)
	for i, gr := range t.Groups {
		if i == MaxGroups {
			break
		}
		id := strconv.FormatUint(uint64(gr.ID), 10)
		gauge(dGroupLeader, b2f(gr.Role == "leader"), id)
		gauge(dGroupSlots, float64(gr.Slots), id)
		if gr.Role == "" {
			continue
		}
		gauge(dGroupKeys, float64(gr.Keys), id)
		gauge(dGroupApplied, float64(gr.Applied), id)
		gauge(dGroupCommit, float64(gr.Commit), id)
		gauge(dGroupLag, float64(gr.Lag), id)
	}
}

func describeRaftSnapshots(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dRaftSnapTaken, dRaftSnapRestored, dRaftSnapDuration, dRaftSnapBytes,
		dRaftSnapTime, dRaftSnapAge, dRaftRestoreDur} {
		ch <- d
	}
}

func collectRaftSnapshots(ch chan<- prometheus.Metric, cl Cluster) {
	st := cl.RaftSnapshotStatus()
	ch <- prometheus.MustNewConstMetric(dRaftSnapTaken, prometheus.CounterValue, float64(st.Taken), "ok")
	ch <- prometheus.MustNewConstMetric(dRaftSnapTaken, prometheus.CounterValue, float64(st.Failures), "failed")
	ch <- prometheus.MustNewConstMetric(dRaftSnapRestored, prometheus.CounterValue, float64(st.Restored))
	ch <- prometheus.MustNewConstMetric(dRaftSnapDuration, prometheus.GaugeValue, max(st.LastDuration.Seconds(), 0))
	ch <- prometheus.MustNewConstMetric(dRaftSnapBytes, prometheus.GaugeValue, float64(st.LastBytes))
	ch <- prometheus.MustNewConstMetric(dRaftSnapTime, prometheus.GaugeValue, float64(st.LastSnapshot.UnixNano())/1e9)
	ch <- prometheus.MustNewConstMetric(dRaftSnapAge, prometheus.GaugeValue, time.Since(st.LastSnapshot).Seconds())
	if st.LastRestoreDuration >= 0 {
		ch <- prometheus.MustNewConstMetric(dRaftRestoreDur, prometheus.GaugeValue, st.LastRestoreDuration.Seconds())
	}
}

// maxmemory (package memlimit).
var (
	dUsedMemory = desc("used_memory_bytes", "Used memory as maxmemory counts it: the Go heap's live bytes at the last collection plus what the engine charges for its stored keys (32 bytes of slot per key plus the key's bytes), as INFO's used_memory.")
	dMaxMemory  = desc("maxmemory_bytes", "The memory limit (maxmemory); 0: none.")
	dEvicted    = desc("evicted_keys_total", "Keys evicted to stay under maxmemory (volatile-ttl): by this server, or in a cluster by the eviction entries this replica applied.")
	dOOM        = desc("maxmemory_refusing_new_keys", "1 while this server refuses to create keys because used memory is above maxmemory.")
	dOffHeap    = desc("offheap_bytes", "Bytes mapped outside the Go heap: the key tables, and a snapshot's copy of the state while a save runs (resident memory the go_memstats metrics do not show).")
)

func describeMemory(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dUsedMemory, dMaxMemory, dEvicted, dOOM, dOffHeap} {
		ch <- d
	}
}

func collectMemory(ch chan<- prometheus.Metric, s Memory) {
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	used, _, _ := s.UsedMemory(ctx)
	cancel()
	limit, _ := s.MaxMemory()
	gauge(dUsedMemory, float64(used))
	gauge(dMaxMemory, float64(limit))
	ch <- prometheus.MustNewConstMetric(dEvicted, prometheus.CounterValue, float64(s.EvictedKeys()))
	gauge(dOOM, b2f(s.RefusingNewKeys()))
	gauge(dOffHeap, float64(offheap.Mapped()))
}

// Describe sends every descriptor.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dBuild, dCommands, dCmdLatency, dPipeLatency, dErrors, dClients, dMaxClients,
		dConnsRecv, dConnsRej, dAuthFail, dRedirects, dKeys, dExpired, dTop, dPolicy, dSnapSaves, dSnapDuration, dSnapTime, dSnapAge,
		dSnapBytes, dSnapKeys, dSnapChanges, dSnapRunning, dSnapLastOK, dSnapRefusing, dRaftState, dRaftTerm, dRaftCommit,
		dRaftApplied, dRaftLast, dRaftSnap, dRaftLag, dRaftLeaders, dRaftLate, dRaftDisk, dRaftDiskErr, dRaftStalls, dRaftHasLdr, dRaftPeers, dRemoved} {
		ch <- d
	}
	describeRaftSnapshots(ch)
	describeGroups(ch)
	describeMemory(ch)
}

// Collect reads the current values.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Server
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	counter := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, lv...)
	}
	gauge(dBuild, 1, c.src.Version, runtime.Version())

	for _, cs := range s.CommandStats() {
		ok := cs.Calls - cs.Allowed - cs.Denied - cs.Failed
		if cs.Decides { // PING never allows or denies: no such series
			counter(dCommands, float64(cs.Allowed), cs.Name, "allowed")
			counter(dCommands, float64(cs.Denied), cs.Name, "denied")
		}
		counter(dCommands, float64(max(ok, 0)), cs.Name, "ok")
		counter(dCommands, float64(cs.Failed+cs.Rejected), cs.Name, "error")
		if cs.Latency.Count > 0 {
			ch <- constHistogram(dCmdLatency, cs.Latency, cs.Name)
		}
	}
	ch <- constHistogram(dPipeLatency, s.BatchLatency())
	for code, n := range s.ErrorStats() {
		counter(dErrors, float64(n), code)
	}
	gauge(dClients, float64(s.ConnectedClients()))
	gauge(dMaxClients, float64(s.MaxClients()))
	n := s.Counters()
	counter(dConnsRecv, float64(n.ConnectionsReceived))
	counter(dConnsRej, float64(n.RejectedConnections))
	counter(dAuthFail, float64(n.AuthFailures))
	counter(dExpired, float64(n.ExpiredKeys))
	if c.src.Groups != nil {
		counter(dRedirects, float64(n.ClusterMoved), "moved")
		counter(dRedirects, float64(n.ClusterCrossSlot), "crossslot")
		counter(dRedirects, float64(n.ClusterDown), "clusterdown")
	}

	if c.src.Engine != nil {
		// Stored-key counts: one short job per shard, no walk, and no
		// clock (a replica's shards must only move on the log's time).
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		u, err := c.src.Engine.Usage(ctx)
		cancel()
		if err == nil {
			for _, k := range engine.Kinds {
				gauge(dKeys, float64(u.Keys[k]), strings.TrimPrefix(k.String(), "rl-"))
			}
		}
	}
	if c.src.TopKeys > 0 {
		seen := map[string]bool{}
		for _, k := range s.TopDenied(c.src.TopKeys) {
			label := LabelSafe(k.Key)
			if seen[label] { // two keys that differ only in invalid bytes
				continue
			}
			seen[label] = true
			gauge(dTop, k.Denied, label)
		}
	}

	// Bounded by the policy count (policy.MaxPolicies); names are
	// label-safe by construction.
	for _, p := range s.PolicyStats() {
		counter(dPolicy, float64(p.Allowed), p.Name, "allowed")
		counter(dPolicy, float64(p.Denied), p.Name, "denied")
	}

	if p := c.src.Persistence; p != nil {
		st := p.PersistenceStatus()
		counter(dSnapSaves, float64(st.Saves), "ok")
		counter(dSnapSaves, float64(st.Failures), "failed")
		gauge(dSnapDuration, st.LastDuration.Seconds())
		gauge(dSnapTime, float64(st.LastSave.UnixNano())/1e9)
		gauge(dSnapAge, time.Since(st.LastSave).Seconds())
		gauge(dSnapBytes, float64(st.LastBytes))
		gauge(dSnapKeys, float64(st.LastKeys))
		gauge(dSnapChanges, float64(st.Changes))
		gauge(dSnapRunning, b2f(st.InProgress))
		gauge(dSnapLastOK, b2f(st.LastOK))
		gauge(dSnapRefusing, b2f(p.StopWrites()))
	}
	if cl := c.src.Cluster; cl != nil {
		st := cl.ClusterStatus()
		for _, state := range raftStates {
			gauge(dRaftState, b2f(st.Role == state), state)
		}
		gauge(dRaftTerm, float64(st.Term))
		gauge(dRaftCommit, float64(st.CommitIndex))
		gauge(dRaftApplied, float64(st.AppliedIndex))
		gauge(dRaftLast, float64(st.LastLogIndex))
		gauge(dRaftSnap, float64(st.SnapshotIndex))
		lag := 0.0
		if st.CommitIndex > st.AppliedIndex {
			lag = float64(st.CommitIndex - st.AppliedIndex)
		}
		gauge(dRaftLag, lag)
		counter(dRaftLeaders, float64(st.LeaderChanges))
		counter(dRaftLate, float64(st.LateForwards))
		gauge(dRaftHasLdr, b2f(st.LeaderID != ""))
		gauge(dRaftDisk, b2f(st.DiskFailed))
		counter(dRaftDiskErr, float64(st.DiskWriteErrors))
		counter(dRaftStalls, float64(st.DiskStalls))
		counter(dRaftLogSync, float64(st.LogSyncs))
		gauge(dRaftPeers, float64(len(st.Nodes)))
		gauge(dRemoved, b2f(st.Removed))
	}
	if c.src.Cluster != nil {
		collectRaftSnapshots(ch, c.src.Cluster)
	}
	if c.src.Groups != nil {
		collectGroups(ch, c.src.Groups)
	}
	collectMemory(ch, c.src.Memory)
}

func constHistogram(d *prometheus.Desc, h status.Histogram, lv ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(status.LatencyBuckets))
	for i, le := range status.LatencyBuckets {
		buckets[le] = h.Cumulative[i]
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.SumSeconds, buckets, lv...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// LabelSafe makes a key usable as a label value: valid UTF-8 (other bytes
// become \xNN) and at most 128 bytes.
func LabelSafe(key string) string {
	if utf8.ValidString(key) && len(key) <= 128 {
		return key
	}
	var b strings.Builder
	for i := 0; i < len(key) && b.Len() < 128; {
		r, n := utf8.DecodeRuneInString(key[i:])
		if r == utf8.RuneError && n <= 1 {
			b.WriteString(`\x`)
			b.WriteByte("0123456789abcdef"[key[i]>>4])
			b.WriteByte("0123456789abcdef"[key[i]&15])
			i++
			continue
		}
		b.WriteString(key[i : i+n])
		i += n
	}
	return b.String()
}
