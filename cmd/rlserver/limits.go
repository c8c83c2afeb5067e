package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/rlserver/rlserver/memlimit"
	"github.com/rlserver/rlserver/resp"
	"github.com/rlserver/rlserver/server"
)

// limitOptions are the input and connection limits (Redis's names where
// Redis has one).
type limitOptions struct {
	maxBulkLen     int64
	maxArgs        int64
	queryBuffer    string // --client-query-buffer-limit as given (Redis's units)
	queryBufBytes  int64  // its value in bytes once checked
	maxInlineLen   int
	maxClients     int
	maxKeyLen      int
	partialTimeout time.Duration
	protectedMode  bool

	// maxmemory (package memlimit): the limit as given (Redis's units),
	// its value in bytes once checked, and the policy.
	maxMemory       string
	maxMemoryBytes  int64
	maxMemoryPolicy string

	// --script-memory-limit as given and in bytes (0: none).
	scriptMemory      string
	scriptMemoryBytes int64
}

// maxQueryBufferLimit is the largest --client-query-buffer-limit: a
// pending command is one buffer, indexed by int.
const maxQueryBufferLimit = 1 << 40

func addLimitFlags(fs *flag.FlagSet, o *limitOptions) {
	fs.Int64Var(&o.maxBulkLen, "proto-max-bulk-len", 8<<20, "largest bulk string (argument) accepted, bytes")
	fs.Int64Var(&o.maxArgs, "max-args", 1<<20, "most arguments accepted in one command (at most 2147483647, as Redis); the bytes they take are bounded by --client-query-buffer-limit")
	fs.StringVar(&o.queryBuffer, "client-query-buffer-limit", "1gb", "most bytes one command may take while it arrives, bytes or with a unit (1mb, 1gb); a client past it is closed")
	fs.IntVar(&o.maxInlineLen, "max-inline-len", 64<<10, "longest inline (telnet-style) command line, bytes")
	fs.IntVar(&o.maxClients, "maxclients", 10000, "most client connections served at once; the next is refused")
	fs.IntVar(&o.maxKeyLen, "max-key-len", 16<<10, "longest key accepted, bytes")
	fs.DurationVar(&o.partialTimeout, "partial-command-timeout", 30*time.Second, "a command whose first bytes arrived must be complete within this (0: no limit)")
	fs.StringVar(&o.maxMemory, "maxmemory", "0", "memory limit for data, bytes or with a unit (100mb, 1gb; 0: none): above it new keys are refused (noeviction) or the keys closest to empty are evicted (volatile-ttl)")
	fs.StringVar(&o.maxMemoryPolicy, "maxmemory-policy", string(memlimit.NoEviction), "what to do above --maxmemory: noeviction (refuse new keys with OOM) , volatile-ttl (evict the keys closest to empty: for a token bucket, the one closest to full; data keys without a TTL stay) or allkeys-lru (evict the data keys used least recently, then the limiter keys closest to empty)")
	fs.StringVar(&o.scriptMemory, "script-memory-limit", "256mb", "most a Lua script's run may grow the server's memory by (a quarter of it is the largest value one of its built-ins may make), bytes or with a unit (0: no limit); a script past it ends with 'not enough memory' (docs/scripts.md)")
	fs.BoolVar(&o.protectedMode, "protected-mode", true, "with no password, refuse clients from other hosts when listening on a non-loopback address")
}

func (o *limitOptions) check() error {
	n, err := memlimit.ParseMemory(o.maxMemory)
	if err != nil {
		return fmt.Errorf("invalid value %q for --maxmemory: use bytes or a number with kb, mb, gb (or k, m, g: powers of 1000)", o.maxMemory)
	}
	o.maxMemoryBytes = n
	sm, err := memlimit.ParseMemory(o.scriptMemory)
	if err != nil || sm < 0 {
		return fmt.Errorf("invalid value %q for --script-memory-limit: use bytes or a number with kb, mb, gb (0: no limit)", o.scriptMemory)
	}
	o.scriptMemoryBytes = sm
	q, err := memlimit.ParseMemory(o.queryBuffer)
	if err != nil || q < 1<<20 || q > maxQueryBufferLimit {
		return fmt.Errorf("invalid value %q for --client-query-buffer-limit: use bytes or a number with kb, mb, gb, between 1mb and 1tb", o.queryBuffer)
	}
	o.queryBufBytes = q
	switch memlimit.EvictionPolicy(o.maxMemoryPolicy) {
	case memlimit.NoEviction, memlimit.VolatileTTL, memlimit.AllKeysLRU:
	default:
		return fmt.Errorf("invalid value %q for --maxmemory-policy: use %s, %s or %s", o.maxMemoryPolicy, memlimit.NoEviction, memlimit.VolatileTTL, memlimit.AllKeysLRU)
	}
	switch {
	case o.maxBulkLen < 1 || o.maxBulkLen > 1<<30:
		return fmt.Errorf("invalid value %d for --proto-max-bulk-len: must be between 1 and 1073741824", o.maxBulkLen)
	case o.maxArgs < 1 || o.maxArgs > math.MaxInt32:
		return fmt.Errorf("invalid value %d for --max-args: must be between 1 and 2147483647", o.maxArgs)
	case o.maxInlineLen < 1 || o.maxInlineLen > 1<<30:
		return fmt.Errorf("invalid value %d for --max-inline-len: must be between 1 and 1073741824", o.maxInlineLen)
	case o.maxClients < 1:
		return fmt.Errorf("invalid value %d for --maxclients: must be at least 1", o.maxClients)
	case o.maxKeyLen < 1 || o.maxKeyLen > 65535:
		return fmt.Errorf("invalid value %d for --max-key-len: must be between 1 and 65535", o.maxKeyLen)
	case o.partialTimeout < 0:
		return fmt.Errorf("invalid value %s for --partial-command-timeout: must not be negative", o.partialTimeout)
	}
	return nil
}

// apply copies the limits into the edge's configuration and its CONFIG GET
// settings.
func (o limitOptions) apply(cfg *server.Config) {
	cfg.Guard = resp.GuardLimits{MaxBulkLen: o.maxBulkLen, MaxArgs: o.maxArgs, MaxInlineLen: o.maxInlineLen, MaxQueryBuffer: o.queryBufBytes}
	cfg.MaxClients = o.maxClients
	cfg.MaxKeyLen = o.maxKeyLen
	cfg.ScriptMemoryLimit = o.scriptMemoryBytes
	if o.scriptMemoryBytes == 0 {
		cfg.ScriptMemoryLimit = -1 // server.Config: negative means no limit
	}
	cfg.PartialTimeout = o.partialTimeout
	if o.partialTimeout == 0 {
		cfg.PartialTimeout = -1 // server.Config: negative means no limit
	}
	cfg.ProtectedMode = o.protectedMode
	protected := "no"
	if o.protectedMode {
		protected = "yes"
	}
	for k, v := range map[string]string{
		"proto-max-bulk-len":        strconv.FormatInt(o.maxBulkLen, 10),
		"max-args":                  strconv.FormatInt(o.maxArgs, 10),
		"client-query-buffer-limit": strconv.FormatInt(o.queryBufBytes, 10), // bytes, as Redis reports it
		"max-inline-len":            strconv.Itoa(o.maxInlineLen),
		"maxclients":                strconv.Itoa(o.maxClients),
		"max-key-len":               strconv.Itoa(o.maxKeyLen),
		"partial-command-timeout":   o.partialTimeout.String(),
		"protected-mode":            protected,
		"maxmemory":                 strconv.FormatInt(o.maxMemoryBytes, 10), // bytes, as Redis reports it
		"script-memory-limit":       strconv.FormatInt(o.scriptMemoryBytes, 10),
	} {
		cfg.Settings[k] = v
	}
}

// startMemoryMonitor applies --maxmemory and --maxmemory-policy to srv and
// runs its memory monitor until ctx ends; wait returns once it has
// stopped (it sends to the engine's shards, so before they close).
func (o limitOptions) startMemoryMonitor(ctx context.Context, srv *server.Server) (wait func()) {
	if err := srv.SetMaxMemory(o.maxMemoryBytes, memlimit.EvictionPolicy(o.maxMemoryPolicy)); err != nil {
		panic(err) // check refused anything SetMaxMemory would
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.MonitorMemory(ctx)
	}()
	return func() { <-done }
}
