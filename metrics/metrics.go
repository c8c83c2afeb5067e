// Package metrics exports rlserver's state to Prometheus: a collector that
// reads the server's counters, the engine's key counts, the snapshot saver
// and the Raft node when a scrape asks, so nothing is done between scrapes
// and the request path only keeps the plain counters it keeps anyway
// (resp/stats.go).
//
// Names follow Prometheus's conventions: rlserver_ prefix, _total for
// counters, base units (_seconds, _bytes). Label sets are bounded: command
// names come from the command table, error codes from the server's own
// texts (at most 128), and the top denied keys are at most TopKeys.
package metrics

import (
	"context"
	"net/http"
	"runtime"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/resp"
)

// Sources are what the metrics read. Server is required; the rest may be
// nil.
type Sources struct {
	Server  *resp.Server
	Engine  *engine.Engine // keys per kind: this replica's engine
	Backend resp.Backend   // resp.Persistence (standalone) or resp.Cluster (cluster mode)
	Version string
	// TopKeys is how many of the most denied keys are exported with their
	// key as a label (default 10; negative: none).
	TopKeys int
}

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
	dCommands    = desc("commands_total", "Commands run, by command and outcome: allowed or denied (limiter decisions), ok (other successes), error (error replies, including commands refused before running).", "command", "outcome")
	dCmdLatency  = desc("command_duration_seconds", "Server time per command: each pipeline's processing time shared equally among its commands.", "command")
	dPipeLatency = desc("pipeline_duration_seconds", "Processing time of whole pipelines (batches of commands read together), before the replies are written.")
	dErrors      = desc("error_replies_total", "Error replies sent, by error code (the first word: ERR, WRONGTYPE, NOAUTH...).", "code")
	dClients     = desc("connected_clients", "Client connections being served.")
	dMaxClients  = desc("max_clients", "The client connection limit (maxclients).")
	dConnsRecv   = desc("connections_received_total", "Client connections accepted.")
	dConnsRej    = desc("connections_rejected_total", "Client connections refused: maxclients reached, or protected mode.")
	dAuthFail    = desc("auth_failures_total", "Failed AUTH and HELLO ... AUTH attempts.")
	dKeys        = desc("keys", "Keys holding limiter state, by state kind (computed at scrape time).", "kind")
	dExpired     = desc("expired_keys_total", "Keys dropped by the background sweep once their state was empty again (keys dropped on access are not counted).")
	dTop         = desc("top_denied_keys", "Denials of the keys denied most in the recent past (decayed with a one-minute half-life), as RL.TOP lists them.", "key")

	dSnapSaves    = desc("snapshot_saves_total", "Snapshot saves, by result (ok or failed).", "result")
	dSnapDuration = desc("snapshot_last_duration_seconds", "Duration of the last successful snapshot save.")
	dSnapTime     = desc("snapshot_last_success_timestamp_seconds", "Unix time of the last successful snapshot save (the start-up time before the first).")
	dSnapAge      = desc("snapshot_age_seconds", "Seconds since the last successful snapshot save.")
	dSnapBytes    = desc("snapshot_last_size_bytes", "File size of the last successful snapshot.")
	dSnapKeys     = desc("snapshot_last_keys", "Keys in the last successful snapshot.")
	dSnapChanges  = desc("snapshot_changes_since_last_save", "Writes to limiter state since the last successful save started.")
	dSnapRunning  = desc("snapshot_in_progress", "1 while a background snapshot save runs.")
	dSnapLastOK   = desc("snapshot_last_save_ok", "1 when the last snapshot save succeeded.")

	dRaftState   = desc("raft_state", "1 for this node's current Raft state, 0 for the others.", "state")
	dRaftTerm    = desc("raft_term", "Current Raft term.")
	dRaftCommit  = desc("raft_commit_index", "Highest log index known to be committed.")
	dRaftApplied = desc("raft_applied_index", "Highest log index applied to this replica's state.")
	dRaftLast    = desc("raft_last_log_index", "Last log index stored on this node.")
	dRaftSnap    = desc("raft_last_snapshot_index", "Log index of the last Raft snapshot.")
	dRaftLag     = desc("raft_apply_lag", "Committed log entries not yet applied here (commit index minus applied index).")
	dRaftLeaders = desc("raft_leader_changes_total", "Leader changes this node observed (elections, hand-offs, losses of the leader).")
	dRaftHasLdr  = desc("raft_has_leader", "1 while this node knows a leader.")
	dRaftPeers   = desc("raft_peers", "Members in the Raft configuration.")
)

var raftStates = []string{"follower", "candidate", "leader", "shutdown"}

// Describe sends every descriptor.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dBuild, dCommands, dCmdLatency, dPipeLatency, dErrors, dClients, dMaxClients,
		dConnsRecv, dConnsRej, dAuthFail, dKeys, dExpired, dTop, dSnapSaves, dSnapDuration, dSnapTime, dSnapAge,
		dSnapBytes, dSnapKeys, dSnapChanges, dSnapRunning, dSnapLastOK, dRaftState, dRaftTerm, dRaftCommit,
		dRaftApplied, dRaftLast, dRaftSnap, dRaftLag, dRaftLeaders, dRaftHasLdr, dRaftPeers} {
		ch <- d
	}
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
		counter(dCommands, float64(cs.Allowed), cs.Name, "allowed")
		counter(dCommands, float64(cs.Denied), cs.Name, "denied")
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
	counter(dConnsRecv, float64(s.Stats.ConnectionsReceived.Load()))
	counter(dConnsRej, float64(s.Stats.RejectedConnections.Load()))
	counter(dAuthFail, float64(s.Stats.AuthFailures.Load()))
	counter(dExpired, float64(s.ExpiredKeys()))

	if c.src.Engine != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		kinds, err := c.src.Engine.CountKinds(ctx, time.Now().UnixNano())
		cancel()
		if err == nil {
			for k := engine.KindGCRA; int(k) < engine.NumKinds; k++ {
				gauge(dKeys, float64(kinds[k]), strings.TrimPrefix(k.String(), "rl-"))
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

	if p, ok := c.src.Backend.(resp.Persistence); ok {
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
	}
	if cl, ok := c.src.Backend.(resp.Cluster); ok {
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
		gauge(dRaftHasLdr, b2f(st.LeaderID != ""))
		gauge(dRaftPeers, float64(len(st.Nodes)))
	}
}

func constHistogram(d *prometheus.Desc, h resp.Histogram, lv ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(resp.LatencyBuckets))
	for i, le := range resp.LatencyBuckets {
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
