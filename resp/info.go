package resp

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// INFO, with Redis's section and field names where they apply.

// redisVersion is the Redis version whose commands and replies rlserver
// follows, reported where clients look for a Redis version.
const redisVersion = "7.4.0"

var infoSections = []string{"server", "clients", "memory", "persistence", "stats", "replication", "keyspace"}

func cmdInfo(s *Server, c *client, args [][]byte) outcome {
	want := map[string]bool{}
	if len(args) == 1 {
		for _, sec := range infoSections {
			want[sec] = true
		}
	}
	for _, a := range args[1:] {
		switch sec := strings.ToLower(string(a)); sec {
		case "all", "default", "everything":
			for _, sec := range infoSections {
				want[sec] = true
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
		b.WriteString("# " + strings.ToUpper(sec[:1]) + sec[1:] + "\r\n")
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
		kv("redis_mode", "standalone")
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
		kv("maxclients", s.cfg.MaxClients)
	case "memory":
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		kv("used_memory", m.HeapAlloc)
		kv("used_memory_human", humanBytes(m.HeapAlloc))
		kv("used_memory_rss", m.Sys-m.HeapReleased)
		kv("used_memory_rss_human", humanBytes(m.Sys-m.HeapReleased))
		kv("total_system_memory", 0)
		kv("maxmemory", 0)
		kv("maxmemory_policy", "noeviction")
	case "stats":
		st := &s.Stats
		kv("total_connections_received", st.ConnectionsReceived.Load())
		kv("rejected_connections", st.RejectedConnections.Load())
		kv("total_commands_processed", st.CommandsProcessed.Load())
		kv("total_error_replies", st.ErrorReplies.Load())
		kv("rl_allowed", st.Allowed.Load())
		kv("rl_denied", st.Denied.Load())
		kv("acl_access_denied_auth", st.AuthFailures.Load())
	case "persistence":
		s.writePersistenceInfo(kv)
	case "replication":
		s.writeReplicationInfo(kv)
	case "keyspace":
		n, err := s.backend.Len(context.Background())
		if err == nil && n > 0 {
			kv("db0", fmt.Sprintf("keys=%d,expires=%d,avg_ttl=0", n, n))
		}
	}
}

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
