package server

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/status"
)

// INFO, with Redis's section and field names where they apply.

// redisVersion is the Redis version whose commands and replies rlserver
// follows, reported where clients look for a Redis version.
const redisVersion = "7.4.0"

// infoSections are INFO's sections in Redis's order; INFO with no
// argument (or "default") gives all but commandstats, as Redis does.
var infoSections = []string{"server", "clients", "memory", "persistence", "stats", "replication", "cpu", "commandstats", "errorstats", "cluster", "keyspace", "policies"}

// infoTitles are the section headers where they are not the capitalized
// name.
var infoTitles = map[string]string{"cpu": "CPU"}

func cmdInfo(s *Server, c *client, args [][]byte) outcome {
	want := map[string]bool{}
	names := args[1:]
	if len(names) == 0 {
		names = [][]byte{[]byte("default")}
	}
	for _, a := range names {
		switch sec := strings.ToLower(string(a)); sec {
		case "all", "everything":
			for _, sec := range infoSections {
				want[sec] = true
			}
		case "default":
			for _, sec := range infoSections {
				want[sec] = want[sec] || sec != "commandstats"
			}
		default:
			want[sec] = true
		}
	}
	var b strings.Builder
	for _, sec := range infoSections {
		if !want[sec] {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		title := infoTitles[sec]
		if title == "" {
			title = strings.ToUpper(sec[:1]) + sec[1:]
		}
		b.WriteString("# " + title + "\r\n")
		s.writeInfoSection(&b, sec)
	}
	c.rep.verbatim(b.String())
	return cmdOK
}

func (s *Server) writeInfoSection(b *strings.Builder, sec string) {
	kv := func(k string, v any) { fmt.Fprintf(b, "%s:%v\r\n", k, v) }
	switch sec {
	case "server":
		up := time.Since(s.started)
		port := ""
		if a := s.Addr(); a != nil {
			if i := strings.LastIndexByte(a.String(), ':'); i >= 0 {
				port = a.String()[i+1:]
			}
		}
		kv("redis_version", redisVersion)
		kv("rlserver_version", s.cfg.Version)
		kv("redis_mode", s.redisMode())
		kv("os", runtime.GOOS+" "+runtime.GOARCH)
		kv("arch_bits", strconv.Itoa(strconv.IntSize))
		kv("go_version", runtime.Version())
		kv("process_id", os.Getpid())
		kv("tcp_port", port)
		kv("server_time_usec", time.Now().UnixMicro())
		kv("uptime_in_seconds", int64(up/time.Second))
		kv("uptime_in_days", int64(up/(24*time.Hour)))
	case "clients":
		s.mu.Lock()
		n := len(s.clients)
		s.mu.Unlock()
		kv("connected_clients", n)
		kv("cluster_connections", 0)
		kv("maxclients", s.MaxClients())
		kv("blocked_clients", s.blocked.n.Load())
		kv("tracking_clients", 0)
	case "memory":
		s.writeMemoryInfo(kv) // memory.go
	case "stats":
		st := s.statsSinceReset() // CONFIG RESETSTAT (stats.go)
		kv("total_connections_received", st.ConnectionsReceived.Load())
		kv("rejected_connections", st.RejectedConnections.Load())
		kv("total_commands_processed", st.CommandsProcessed.Load())
		kv("total_net_input_bytes", st.NetInputBytes.Load())
		kv("total_net_output_bytes", st.NetOutputBytes.Load())
		inst := s.instantaneous()
		kv("instantaneous_ops_per_sec", int64(inst[0]+0.5))
		kv("total_error_replies", st.ErrorReplies.Load())
		kv("expired_keys", st.ExpiredKeys.Load())
		kv("evicted_keys", s.evictedSinceReset())
		kv("rl_allowed", st.Allowed.Load())
		kv("rl_denied", st.Denied.Load())
		kv("rl_instantaneous_allowed_per_sec", int64(inst[1]+0.5))
		kv("rl_instantaneous_denied_per_sec", int64(inst[2]+0.5))
		kv("acl_access_denied_auth", st.AuthFailures.Load())
		kv("acl_access_denied_cmd", st.ACLDeniedCmd.Load())
		kv("acl_access_denied_key", st.ACLDeniedKey.Load())
		// Keyed commands refused by slot routing (route.go); always 0
		// without the Redis Cluster protocol.
		kv("cluster_moved_replies", st.ClusterMoved.Load())
		kv("cluster_crossslot_replies", st.ClusterCrossSlot.Load())
		kv("cluster_down_replies", st.ClusterDown.Load())
	case "cpu":
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
			kv("used_cpu_sys", fmt.Sprintf("%.6f", tvSeconds(ru.Stime)))
			kv("used_cpu_user", fmt.Sprintf("%.6f", tvSeconds(ru.Utime)))
		}
		kv("used_cpu_sys_children", "0.000000")
		kv("used_cpu_user_children", "0.000000")
	case "commandstats":
		for _, cs := range s.commandStatsSinceReset() {
			usec := int64(cs.Latency.SumSeconds * 1e6)
			line := fmt.Sprintf("calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d",
				cs.Calls, usec, usecPerCall(cs.Latency.SumSeconds, cs.Calls), cs.Rejected, cs.Failed)
			if cs.Allowed+cs.Denied > 0 {
				line += fmt.Sprintf(",rl_allowed=%d,rl_denied=%d", cs.Allowed, cs.Denied)
			}
			kv("cmdstat_"+cs.Name, line)
		}
	case "errorstats":
		errs := s.errorStatsSinceReset()
		codes := make([]string, 0, len(errs))
		for code := range errs {
			codes = append(codes, code)
		}
		sort.Strings(codes)
		for _, code := range codes {
			kv("errorstat_"+code, "count="+strconv.FormatInt(errs[code], 10))
		}
	case "persistence":
		s.writePersistenceInfo(kv)
		s.writeRaftSnapshotInfo(kv) // cluster mode: Raft's snapshots (raftsnap.go)
	case "replication":
		var st *status.Cluster // command.ReplicationInfo: nil alone
		if cl := s.cfg.Cluster; cl != nil {
			cs := cl.ClusterStatus()
			st = &cs
		}
		command.ReplicationInfo(st, s.router != nil, kv)
	case "cluster":
		// Redis's: whether the Redis Cluster protocol is on (a SlotRouter
		// backend: --groups). The replication section's raft_* fields
		// say whether the backend is replicated.
		kv("cluster_enabled", b01(s.router != nil))
		if s.router != nil {
			t := s.router.Topology()
			writeGroupInfo(kv, t)
			writeMoveInfo(kv, t)
			writePlacementInfo(kv, t.Placement)
		}
	case "policies":
		s.writePolicyInfo(kv) // policies.go
	case "keyspace":
		s.writeKeyspaceInfo(kv) // memory.go: stored-key counts, no walk
	}
}

// writeGroupInfo writes which data groups this node's counts cover:
// cluster_groups (in the directory), cluster_led_groups (led here: what
// DBSIZE counts with --cluster-redirect moved, and the keys RL.TOP sees)
// and cluster_replica_groups (replicas here: what INFO keyspace counts),
// as comma-separated group ids ("" for none).
func writeGroupInfo(kv func(string, any), t status.Topology) {
	var led, replicas []string
	for _, g := range t.Groups {
		id := strconv.FormatUint(uint64(g.ID), 10)
		if g.Role != "" {
			replicas = append(replicas, id)
		}
		if g.Role == "leader" {
			led = append(led, id)
		}
	}
	kv("cluster_groups", len(t.Groups))
	kv("cluster_led_groups", strings.Join(led, ","))
	kv("cluster_replica_groups", strings.Join(replicas, ","))
}

// writeMoveInfo writes the cluster section's slot-move fields (a
// SlotRouter backend only; Redis has none of them):
//
//   - cluster_moves_in_progress: 1 while a move is begun or committed (at
//     most one at a time), else 0;
//   - cluster_move_id, _slots ("first-last", inclusive, even for one
//     slot), _from and _to (group ids), _state ("begun", "committed") and
//     _keys (records the target imported so far, as this node's replica of
//     the target counts them: 0 on a node that does not host it): the
//     move in progress, absent while there is none;
//   - cluster_moves_finished: the released moves the slot directory still
//     lists (it keeps the last 16), not a running total;
//   - cluster_rebalancing: 1 while a rebalance started on this node runs.
//
// The move in progress is found by its state, not its place in t.Moves.
func writeMoveInfo(kv func(string, any), t status.Topology) {
	var cur *status.Move
	finished := 0
	for i, m := range t.Moves {
		if m.State == "released" {
			finished++
		} else {
			cur = &t.Moves[i]
		}
	}
	kv("cluster_moves_in_progress", b01(cur != nil))
	if cur != nil {
		kv("cluster_move_id", cur.ID)
		kv("cluster_move_slots", strconv.Itoa(cur.Start)+"-"+strconv.Itoa(cur.End))
		kv("cluster_move_from", cur.Source)
		kv("cluster_move_to", cur.Target)
		kv("cluster_move_state", cur.State)
		kv("cluster_move_keys", cur.Keys)
	}
	kv("cluster_moves_finished", finished)
	kv("cluster_rebalancing", b01(t.Rebalancing))
}

// writePlacementInfo writes the replica placement's fields, in a cluster
// with a replication factor only (--replicas): cluster_replicas (R),
// cluster_groups_under_replicated (groups with fewer voters on nodes not
// dead than R, or than the nodes available when fewer),
// cluster_replica_moves_in_progress (groups adding a replica),
// cluster_replica_moves_finished (replicas added since the cluster
// began), cluster_nodes_dead and cluster_nodes_draining.
func writePlacementInfo(kv func(string, any), p *status.Placement) {
	if p == nil {
		return
	}
	kv("cluster_replicas", p.Replicas)
	kv("cluster_groups_under_replicated", p.UnderReplicated)
	kv("cluster_replica_moves_in_progress", p.MovesInProgress)
	kv("cluster_replica_moves_finished", p.MovesFinished)
	kv("cluster_nodes_dead", p.DeadNodes)
	kv("cluster_nodes_draining", p.DrainingNodes)
}

// redisMode is INFO's redis_mode and HELLO's mode: "cluster" when the
// server speaks the Redis Cluster protocol, else "standalone".
func (s *Server) redisMode() string {
	if s.router != nil {
		return "cluster"
	}
	return "standalone"
}

func tvSeconds(tv syscall.Timeval) float64 {
	return float64(tv.Sec) + float64(tv.Usec)/1e6
}

// ExpiredKeys counts the keys the background sweep dropped (the
// backend's count).
func (s *Server) ExpiredKeys() int64 { return s.backend.ExpiredKeys() }

// totalSystemMemory is INFO's total_system_memory: the machine's memory
// in bytes, /proc/meminfo's MemTotal (what Redis reports: its
// sysconf(_SC_PHYS_PAGES) * page size comes from the same count), read
// once; 0 where there is no /proc. Like Redis's, it is the host's memory,
// not a container's limit.
var totalSystemMemory = sync.OnceValue(func() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "MemTotal:" && f[2] == "kB" {
			if kb, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				return kb << 10
			}
		}
	}
	return 0
})

func humanBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2fK", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}
