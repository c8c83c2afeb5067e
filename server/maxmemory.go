package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/offheap"
)

// maxmemory: the memory limit, its policy, and the monitor that enforces
// it.
//
// Used memory is the Go heap's live objects as of the last collection
// (runtime/metrics /gc/heap/live:bytes: connection buffers, the per-kind
// state of window and log keys, snapshots being written...) plus what the
// engine charges for its stored keys (engine.Usage.Charged: 32 bytes of
// slot per key plus its bytes, whose tables live outside the Go heap).
// Both parts move only when data is added or removed, not with the
// garbage waiting for the collector, so the limit does not flap, and
// deleting or evicting a key makes room at once, as in Redis.
//
// The engine never measures memory: replicas must agree. The monitor
// measures it every monitorInterval and, through the backend, turns the
// engine's no-create mode on while used memory is above the limit
// (noeviction), or evicts the keys closest to being empty (volatile-ttl:
// for a token bucket, the one closest to full) until it is below. In a
// cluster only the leader's monitor acts, and both decisions go through
// the Raft log.

// MemoryBackend is the part of a Backend that maxmemory needs. Standalone
// implements it with the engine; a cluster node through the log.
type MemoryBackend interface {
	// Usage reads this replica's stored keys and table memory (O(shards)).
	Usage(ctx context.Context) (engine.Usage, error)
	// MemoryLeader reports whether this process decides for the data:
	// always standalone, on the leader in a cluster.
	MemoryLeader() bool
	// SetNoCreate turns the refusal of new keys on or off.
	SetNoCreate(ctx context.Context, on bool) error
	// Evict runs one round of eviction and returns the keys removed.
	Evict(ctx context.Context, r engine.EvictRange) (int, error)
}

// Eviction policies, by Redis's names.
const (
	PolicyNoEviction  = "noeviction"
	PolicyVolatileTTL = "volatile-ttl"
)

// monitorInterval is how often used memory is checked against the limit.
const monitorInterval = 100 * time.Millisecond

// evictSamples is how many sampled keys each eviction picks its victim
// from, as Redis's maxmemory-samples (default 5).
const evictSamples = 5

// maxEvictRound bounds the keys one eviction round removes, so a round
// reads at most about evictSamples*maxEvictRound keys per table (a
// millisecond or two of a shard's time); a check runs up to 16 rounds.
const maxEvictRound = 4096

// memLimit is the server's maxmemory state.
type memLimit struct {
	limit    atomic.Int64 // bytes; 0: no limit
	volatile atomic.Bool  // policy volatile-ttl (else noeviction)
	evicted  atomic.Int64 // keys evicted by this server's monitor (standalone)
	noCreate atomic.Bool  // the last mode this server's monitor set

	mu     sync.Mutex // one monitor round at a time
	cursor uint64     // where the next eviction range starts
	lastGC time.Time  // the monitor's last forced collection
}

// gcRefresh is the shortest time between two collections the monitor
// forces to refresh the live heap figure, which otherwise dates from the
// last collection: on an idle server, possibly from the middle of a
// snapshot save whose copy is long gone.
const gcRefresh = time.Second

// Standalone's MemoryBackend: the engine directly.

// Usage reads the engine's stored keys and table memory.
func (b Standalone) Usage(ctx context.Context) (engine.Usage, error) { return b.Engine.Usage(ctx) }

// MemoryLeader is always true: a standalone server decides for itself.
func (b Standalone) MemoryLeader() bool { return true }

// SetNoCreate turns the engine's no-create mode on or off.
func (b Standalone) SetNoCreate(ctx context.Context, on bool) error {
	return b.Engine.SetNoCreate(ctx, on)
}

// Evict runs one round of eviction at the current time.
func (b Standalone) Evict(ctx context.Context, r engine.EvictRange) (int, error) {
	return b.Engine.Evict(ctx, nowNanos(), r)
}

// ParseMemory parses a byte count with Redis's units: a plain number of
// bytes, or one followed by k, kb, m, mb, g, gb (any case; k = 1000,
// kb = 1024, and so on).
func ParseMemory(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	units := []struct {
		suffix string
		mul    int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1000}, {"m", 1000 * 1000}, {"g", 1000 * 1000 * 1000}, {"b", 1}}
	mul := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mul = strings.TrimSuffix(t, u.suffix), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mul {
		return 0, fmt.Errorf("argument must be a memory value")
	}
	return n * mul, nil
}

// SetMaxMemory sets the limit (bytes, 0: none) and the policy
// (PolicyNoEviction or PolicyVolatileTTL).
func (s *Server) SetMaxMemory(limit int64, policy string) error {
	if limit < 0 {
		return errors.New("maxmemory must not be negative")
	}
	switch policy {
	case PolicyNoEviction, PolicyVolatileTTL:
	default:
		return fmt.Errorf("maxmemory-policy %q is not supported: use %s or %s", policy, PolicyNoEviction, PolicyVolatileTTL)
	}
	s.mem.limit.Store(limit)
	s.mem.volatile.Store(policy == PolicyVolatileTTL)
	return nil
}

// MaxMemory reports the limit in bytes (0: none) and the policy.
func (s *Server) MaxMemory() (int64, string) {
	p := PolicyNoEviction
	if s.mem.volatile.Load() {
		p = PolicyVolatileTTL
	}
	return s.mem.limit.Load(), p
}

// EvictedKeys counts the keys evicted for maxmemory: by this server's
// monitor, or, in a cluster, by the eviction entries this replica applied.
func (s *Server) EvictedKeys() int64 {
	if b, ok := s.backend.(interface{ EvictedKeys() int64 }); ok {
		return b.EvictedKeys()
	}
	return s.mem.evicted.Load()
}

// RefusingNewKeys reports whether this server's monitor last turned the
// refusal of new keys on.
func (s *Server) RefusingNewKeys() bool { return s.mem.noCreate.Load() }

// heapLive reads the Go heap's live bytes as of the last collection.
func heapLive() int64 {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(sample[0].Value.Uint64())
}

// UsedMemory reports used memory as maxmemory counts it (see the top of
// this file) and the engine usage it read, ok false when the backend
// cannot report its keys.
func (s *Server) UsedMemory(ctx context.Context) (used int64, u engine.Usage, ok bool) {
	used = heapLive()
	mb, ok := s.backend.(MemoryBackend)
	if !ok {
		return used, u, false
	}
	u, err := mb.Usage(ctx)
	if err != nil {
		return used, u, false
	}
	return used + u.Charged, u, true
}

// MonitorMemory enforces maxmemory until ctx ends: every monitorInterval
// it compares used memory with the limit and acts (see the top of this
// file). It does nothing when the backend is not a MemoryBackend.
func (s *Server) MonitorMemory(ctx context.Context) {
	mb, ok := s.backend.(MemoryBackend)
	if !ok {
		return
	}
	t := time.NewTicker(monitorInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.enforceMemory(ctx, mb)
	}
}

// enforceMemory is one round of the monitor.
func (s *Server) enforceMemory(ctx context.Context, mb MemoryBackend) {
	s.mem.mu.Lock()
	defer s.mem.mu.Unlock()
	if !mb.MemoryLeader() {
		s.mem.noCreate.Store(false) // a new leader decides afresh
		return
	}
	limit := s.mem.limit.Load()
	heap := heapLive()
	u, err := mb.Usage(ctx)
	if err != nil {
		return
	}
	used := heap + u.Charged
	if limit > 0 && used > limit && time.Since(s.mem.lastGC) >= gcRefresh {
		runtime.GC()
		s.mem.lastGC = time.Now()
		heap = heapLive()
		used = heap + u.Charged
	}
	// Evicting keys shrinks only their charge: when the heap alone is
	// above the limit, eviction cannot help, and new keys are refused
	// instead.
	if limit > 0 && used > limit && heap < limit && s.mem.volatile.Load() {
		// Evict in rounds sized to the excess, each picking among
		// evictSamples times as many sampled keys, until below the
		// limit; a bounded number per check, so a flood of new keys
		// cannot hold the monitor here.
		for round := 0; round < 16 && used > limit && u.Stored > 0; round++ {
			perKey := max(u.Charged/int64(u.Stored), 1)
			n := int((used-limit+perKey-1)/perKey) + 1
			n = min(n, max(u.Stored/8, 64), maxEvictRound)
			r := s.nextEvictRange(n, u.Stored)
			evicted, err := mb.Evict(ctx, r)
			if err != nil {
				break
			}
			if _, cluster := s.backend.(interface{ EvictedKeys() int64 }); !cluster {
				s.mem.evicted.Add(int64(evicted))
			}
			if u, err = mb.Usage(ctx); err != nil {
				break
			}
			used = heap + u.Charged
		}
	}
	// noeviction refuses new keys while above the limit; volatile-ttl
	// too when eviction could not get below it (nothing left to evict,
	// or keys created faster than this round evicted).
	want := limit > 0 && used > limit
	if want != s.mem.noCreate.Load() || want {
		if err := mb.SetNoCreate(ctx, want); err == nil {
			s.mem.noCreate.Store(want)
		}
	}
}

// nextEvictRange returns the hash range of the next eviction round: wide
// enough to hold about evictSamples*n of the stored keys (hashes are
// uniform), starting where the last one ended. A range cut short by the
// end of the hash space evicts proportionally fewer keys (the next round
// starts again at 0), so every round picks among evictSamples times as
// many keys as it evicts.
func (s *Server) nextEvictRange(n, stored int) engine.EvictRange {
	from := s.mem.cursor
	frac := float64(evictSamples*n) / float64(max(stored, 1))
	to := uint64(math.MaxUint64)
	if frac < 1 {
		width := uint64(frac * (1 << 63) * 2)
		if w, carry := bits.Add64(from, width, 0); carry == 0 {
			to = w
		} else {
			cut := float64(to-from) / float64(width)
			n = max(1, int(float64(n)*cut))
		}
	}
	s.mem.cursor = to + 1 // 0 after the end
	return engine.EvictRange{From: from, To: to, N: n}
}

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
	kv("maxmemory_policy", policy)
	kv("rl_oom_refusing_new_keys", b01(s.mem.noCreate.Load()))
}

func b01(b bool) int {
	if b {
		return 1
	}
	return 0
}

// writeKeyspaceInfo writes INFO's keyspace section from the stored-key
// counts (O(shards)); a backend that cannot report them is asked for
// Len.
func (s *Server) writeKeyspaceInfo(kv func(string, any)) {
	n := 0
	if mb, ok := s.backend.(MemoryBackend); ok {
		u, err := mb.Usage(context.Background())
		if err != nil {
			return
		}
		n = u.Stored
	} else {
		var err error
		if n, err = s.backend.Len(context.Background()); err != nil {
			return
		}
	}
	if n > 0 {
		kv("db0", fmt.Sprintf("keys=%d,expires=%d,avg_ttl=0", n, n))
	}
}

// configSetMemory handles CONFIG SET maxmemory and maxmemory-policy; ok
// is false for other names.
func (s *Server) configSetMemory(name, value string) (text string, ok bool) {
	switch name {
	case "maxmemory":
		n, err := ParseMemory(value)
		if err != nil {
			return err.Error(), true
		}
		_, policy := s.MaxMemory()
		s.SetMaxMemory(n, policy)
	case "maxmemory-policy":
		limit, _ := s.MaxMemory()
		if err := s.SetMaxMemory(limit, strings.ToLower(value)); err != nil {
			return "argument must be one of " + PolicyNoEviction + ", " + PolicyVolatileTTL, true
		}
	default:
		return "", false
	}
	// Act now, not at the next tick, so a client that lowers the limit
	// sees it enforced on its next command.
	if mb, ok := s.backend.(MemoryBackend); ok {
		s.enforceMemory(context.Background(), mb)
	}
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
