package server

import (
	"context"
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/offheap"
	"github.com/rlserver/rlserver/memlimit"
)

// maxmemory: the server's memlimit.Controller, its INFO sections and
// CONFIG SET.

// SetMaxMemory sets the limit (bytes, 0: none) and the eviction policy.
func (s *Server) SetMaxMemory(limit int64, p memlimit.EvictionPolicy) error {
	return s.mem.Set(limit, p)
}

// MaxMemory reports the limit in bytes (0: none) and the eviction policy.
func (s *Server) MaxMemory() (int64, memlimit.EvictionPolicy) { return s.mem.Limit() }

// EvictedKeys counts the keys evicted for maxmemory: by the standalone
// backend, or, in a cluster, by the eviction entries this replica applied.
func (s *Server) EvictedKeys() int64 { return s.backend.EvictedKeys() }

// RefusingNewKeys reports whether this server's memory controller last
// turned the refusal of new keys on.
func (s *Server) RefusingNewKeys() bool { return s.mem.RefusingNewKeys() }

// UsedMemory reports used memory as maxmemory counts it (see package
// memlimit) and the engine usage it read, ok false when the backend could
// not report its keys.
func (s *Server) UsedMemory(ctx context.Context) (used int64, u engine.Usage, ok bool) {
	used, u, err := s.mem.Used(ctx)
	return used, u, err == nil
}

// MonitorMemory enforces maxmemory until ctx ends (memlimit.Controller.Run).
func (s *Server) MonitorMemory(ctx context.Context) { s.mem.Run(ctx) }

// writeMemoryInfo writes INFO's memory section.
func (s *Server) writeMemoryInfo(kv func(string, any)) {
	var ms [3]metrics.Sample
	ms[0].Name = "/memory/classes/total:bytes"
	ms[1].Name = "/memory/classes/heap/released:bytes"
	ms[2].Name = "/gc/heap/live:bytes"
	metrics.Read(ms[:])
	u64 := func(i int) uint64 {
		if ms[i].Value.Kind() == metrics.KindUint64 {
			return ms[i].Value.Uint64()
		}
		return 0
	}
	used, usage, _ := s.UsedMemory(context.Background())
	offHeap := uint64(offheap.Mapped())
	rss, ok := residentBytes()
	if !ok { // no /proc: what the Go runtime maps, plus the tables
		rss = u64(0) - u64(1) + offHeap
	}
	limit, policy := s.MaxMemory()
	kv("used_memory", used)
	kv("used_memory_human", humanBytes(uint64(used)))
	kv("used_memory_rss", rss)
	kv("used_memory_rss_human", humanBytes(rss))
	kv("used_memory_dataset", usage.Charged)
	kv("rl_heap_live", u64(2))
	kv("rl_tables_allocated", usage.Allocated)
	kv("rl_offheap", offHeap)
	kv("total_system_memory", totalSystemMemory())
	kv("total_system_memory_human", humanBytes(totalSystemMemory()))
	kv("maxmemory", limit)
	kv("maxmemory_human", humanBytes(uint64(limit)))
	kv("maxmemory_policy", string(policy))
	// Redis names its allocator (jemalloc-5.3.0, libc); values live in
	// Go's heap and the shards' off-heap tables. Tools and Redis's own
	// tests read it to decide what to expect of MEMORY USAGE.
	kv("mem_allocator", "go")
	kv("number_of_cached_scripts", s.env.CachedScripts())
	kv("rl_oom_refusing_new_keys", b01(s.mem.RefusingNewKeys()))
}

func b01(b bool) int {
	if b {
		return 1
	}
	return 0
}

// writeKeyspaceInfo writes INFO's keyspace section from the stored-key
// counts (O(shards)).
func (s *Server) writeKeyspaceInfo(kv func(string, any)) {
	u, err := s.backend.Usage(context.Background())
	if err != nil {
		return
	}
	if n := u.Stored; n > 0 {
		kv("db0", fmt.Sprintf("keys=%d,expires=%d,avg_ttl=0", n, n))
	}
	for _, k := range engine.Kinds { // stored keys by kind, those there are
		if u.Keys[k] > 0 {
			kv("rl_keys_"+strings.TrimPrefix(k.String(), "rl-"), u.Keys[k])
		}
	}
}

// configSetMemory handles CONFIG SET maxmemory and maxmemory-policy; ok
// is false for other names.
func (s *Server) configSetMemory(name, value string) (text string, ok bool) {
	switch name {
	case "maxmemory":
		n, err := memlimit.ParseMemory(value)
		if err != nil {
			return err.Error(), true
		}
		_, policy := s.MaxMemory()
		s.SetMaxMemory(n, policy)
	case "maxmemory-policy":
		limit, _ := s.MaxMemory()
		if err := s.SetMaxMemory(limit, memlimit.EvictionPolicy(strings.ToLower(value))); err != nil {
			return "argument must be one of " + string(memlimit.NoEviction) + ", " + string(memlimit.VolatileTTL) + ", " + string(memlimit.AllKeysLRU), true
		}
	default:
		return "", false
	}
	// Act now, not at the next tick, so a client that lowers the limit
	// sees it enforced on its next command.
	s.mem.Enforce(context.Background())
	return "", true
}

// residentBytes reads the process's resident set size from
// /proc/self/statm (Linux).
func residentBytes() (uint64, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * uint64(os.Getpagesize()), true
}
