package main

import (
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/rlserver/rlserver/resp"
)

// limitOptions are the input and connection limits (Redis's names where
// Redis has one).
type limitOptions struct {
	maxBulkLen     int64
	maxArgs        int64
	maxInlineLen   int
	maxClients     int
	maxKeyLen      int
	partialTimeout time.Duration
	protectedMode  bool
}

func addLimitFlags(fs *flag.FlagSet, o *limitOptions) {
	fs.Int64Var(&o.maxBulkLen, "proto-max-bulk-len", 1<<20, "largest bulk string (argument) accepted, bytes")
	fs.Int64Var(&o.maxArgs, "max-args", 1024, "most arguments accepted in one command")
	fs.IntVar(&o.maxInlineLen, "max-inline-len", 64<<10, "longest inline (telnet-style) command line, bytes")
	fs.IntVar(&o.maxClients, "maxclients", 10000, "most client connections served at once; the next is refused")
	fs.IntVar(&o.maxKeyLen, "max-key-len", 16<<10, "longest key accepted, bytes")
	fs.DurationVar(&o.partialTimeout, "partial-command-timeout", 30*time.Second, "a command whose first bytes arrived must be complete within this (0: no limit)")
	fs.BoolVar(&o.protectedMode, "protected-mode", true, "with no password, refuse clients from other hosts when listening on a non-loopback address")
}

func (o limitOptions) check() error {
	switch {
	case o.maxBulkLen < 1 || o.maxBulkLen > 1<<30:
		return fmt.Errorf("invalid value %d for --proto-max-bulk-len: must be between 1 and 1073741824", o.maxBulkLen)
	case o.maxArgs < 1 || o.maxArgs > 1<<20:
		return fmt.Errorf("invalid value %d for --max-args: must be between 1 and 1048576", o.maxArgs)
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
func (o limitOptions) apply(cfg *resp.Config) {
	cfg.Guard = resp.GuardLimits{MaxBulkLen: o.maxBulkLen, MaxArgs: o.maxArgs, MaxInlineLen: o.maxInlineLen}
	cfg.MaxClients = o.maxClients
	cfg.MaxKeyLen = o.maxKeyLen
	cfg.PartialTimeout = o.partialTimeout
	if o.partialTimeout == 0 {
		cfg.PartialTimeout = -1 // resp: negative means no limit
	}
	cfg.ProtectedMode = o.protectedMode
	protected := "no"
	if o.protectedMode {
		protected = "yes"
	}
	for k, v := range map[string]string{
		"proto-max-bulk-len":      strconv.FormatInt(o.maxBulkLen, 10),
		"max-args":                strconv.FormatInt(o.maxArgs, 10),
		"max-inline-len":          strconv.Itoa(o.maxInlineLen),
		"maxclients":              strconv.Itoa(o.maxClients),
		"max-key-len":             strconv.Itoa(o.maxKeyLen),
		"partial-command-timeout": o.partialTimeout.String(),
		"protected-mode":          protected,
	} {
		cfg.Settings[k] = v
	}
}
