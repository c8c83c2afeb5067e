package server

import (
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/memlimit"
)

// CONFIG SET, the settings CONFIG GET reads, and the rate-limited warnings
// about clients that the server logs.

// settings returns a copy of the CONFIG GET answers.
func (s *Server) settings() map[string]string {
	s.settingsMu.RLock()
	defer s.settingsMu.RUnlock()
	out := make(map[string]string, len(s.cfg.Settings))
	for k, v := range s.cfg.Settings {
		out[k] = v
	}
	return out
}

// settingAliases are Redis's spellings of settings whose flag is named
// otherwise; CONFIG SET takes both.
var settingAliases = map[string]string{"loglevel": "log-level", "lua-time-limit": "busy-reply-threshold"}

// cmdConfigSet: CONFIG SET name value [name value ...], all or nothing, as
// in Redis 7:
//
//  1. Every name must be known (else "Unknown option ..." naming the first
//     unknown one) and given once (a name or its alias twice: "duplicate
//     parameter"); these errors name the argument as given, as Redis's.
//  2. The pairs are taken in order. A setting of the edge's own
//     (checkSetting) is only checked here; any other (log level, save
//     interval...) is applied at once through Config.ConfigSet. The first
//     that fails is reported, and the ones applied before it are set back
//     to their previous CONFIG GET values, newest first.
//  3. The edge's own settings are applied last: they were checked, so they
//     cannot fail, and none has acted (maxmemory evicts) when another
//     value is refused.
//
// An odd number of arguments is Redis's syntax error (three arguments are
// the arity error, from the table).
func cmdConfigSet(s *Server, c *client, args [][]byte) outcome {
	if len(args)%2 != 0 {
		c.rep.error(command.ErrSyntax)
		return cmdOK
	}
	n := (len(args) - 2) / 2
	names, keys := make([]string, n), make([]string, n)
	old := s.settings()
	for i := range n {
		names[i] = strings.ToLower(string(args[2+2*i]))
		keys[i] = names[i]
		if a, ok := settingAliases[names[i]]; ok {
			keys[i] = a
		}
		_, known := old[names[i]]
		if _, own := s.checkSetting(keys[i], ""); !known && !own {
			c.rep.error(command.UnknownSetting(string(args[2+2*i])))
			return cmdOK
		}
	}
	for i := range n {
		for j := range i {
			if keys[j] == keys[i] {
				c.rep.error(command.ConfigSetFailed(string(args[2+2*i]), "duplicate parameter"))
				return cmdOK
			}
		}
	}
	var applied []int // pairs applied through Config.ConfigSet, in order
	for i := range n {
		value := string(args[3+2*i])
		why, own := s.checkSetting(keys[i], value)
		if own && why == "" {
			continue
		}
		text := ""
		if own {
			text = command.ConfigSetFailed(names[i], why)
		} else {
			text = s.configSet(names[i], value)
		}
		if text != "" {
			for k := len(applied) - 1; k >= 0; k-- {
				j := applied[k]
				prev, ok := old[names[j]]
				if !ok {
					prev, ok = old[keys[j]]
				}
				if ok {
					s.configSet(names[j], prev)
				}
			}
			c.rep.error(text)
			return cmdOK
		}
		applied = append(applied, i)
	}
	for i := range n {
		value := string(args[3+2*i])
		if _, own := s.checkSetting(keys[i], value); own {
			s.configSet(names[i], value) // checked: cannot fail
		}
		s.logger().Info("config set", "name", names[i], "value", value)
	}
	c.rep.conn.WriteString("OK")
	return cmdOK
}

// checkSetting checks a value of one of the edge's own settings without
// applying it; own is false for a setting it does not know (applied
// through Config.ConfigSet). why is the reason a value is refused.
func (s *Server) checkSetting(key, value string) (why string, own bool) {
	switch key {
	case "maxclients":
		if n, err := strconv.Atoi(value); err != nil || n < 1 {
			return "argument must be an integer of at least 1", true
		}
	case "maxmemory":
		if _, err := memlimit.ParseMemory(value); err != nil {
			return err.Error(), true
		}
	case "maxmemory-policy":
		switch memlimit.EvictionPolicy(strings.ToLower(value)) {
		case memlimit.NoEviction, memlimit.VolatileTTL, memlimit.AllKeysLRU:
		default:
			// Redis's enum text, listing the policies rlserver has.
			return "argument(s) must be one of the following: " + string(memlimit.VolatileTTL) + ", " + string(memlimit.AllKeysLRU) + ", " + string(memlimit.NoEviction), true
		}
	case "proto-max-bulk-len", "max-args", "max-inline-len":
		n, err := memlimit.ParseMemory(value)
		switch {
		case err != nil || n < 1:
			return "argument must be a positive number of " + map[string]string{"max-args": "arguments", "proto-max-bulk-len": "bytes", "max-inline-len": "bytes"}[key], true
		case key == "max-args" && n > 1<<20:
			return "argument must be between 1 and 1048576", true
		case n > 1<<30:
			return "argument must be between 1 and 1073741824", true
		}
	case "max-key-len":
		if n, err := strconv.Atoi(value); err != nil || n < 1 || n > 65535 {
			return "argument must be an integer between 1 and 65535", true
		}
	case "busy-reply-threshold", "lua-time-limit":
		if n, err := strconv.ParseInt(value, 10, 64); err != nil || n < 0 || n > math.MaxInt64/int64(time.Millisecond) {
			return "argument couldn't be parsed into an integer", true
		}
	case "script-memory-limit":
		if _, err := memlimit.ParseMemory(value); err != nil {
			return "argument must be a memory value", true
		}
	default:
		if kv.IsTunable(key) {
			if _, err := strconv.ParseInt(value, 10, 64); err != nil {
				return "argument couldn't be parsed into an integer", true
			}
			return "", true
		}
		return "", false
	}
	return "", true
}

func cmdConfigResetStat(s *Server, c *client, _ [][]byte) outcome {
	s.resetStats()
	c.rep.conn.WriteString("OK")
	return cmdOK
}

// configSet applies one setting and records it for CONFIG GET; it returns
// an error reply's text.
func (s *Server) configSet(name, value string) string {
	failed := func(why string) string { return command.ConfigSetFailed(name, why) }
	key := name
	if a, ok := settingAliases[name]; ok {
		key = a
	}
	switch key {
	case "maxclients":
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 {
			return failed("argument must be an integer of at least 1")
		}
		s.mu.Lock()
		s.cfg.MaxClients = n
		s.mu.Unlock()
	case "maxmemory", "maxmemory-policy": // memory.go
		if why, _ := s.configSetMemory(key, value); why != "" {
			return failed(why)
		}
	case "proto-max-bulk-len", "max-args", "max-inline-len":
		if why := s.configSetFraming(key, value); why != "" {
			return failed(why)
		}
	case "max-key-len":
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 || n > 65535 {
			return failed("argument must be an integer between 1 and 65535")
		}
		s.maxKeyLen.Store(int64(n))
	case "busy-reply-threshold":
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || n < 0 || n > math.MaxInt64/int64(time.Millisecond) {
			return failed("argument couldn't be parsed into an integer")
		}
		s.env.SetBusyAfter(time.Duration(n) * time.Millisecond)
	case "script-memory-limit":
		n, err := memlimit.ParseMemory(value)
		if err != nil {
			return failed("argument must be a memory value")
		}
		s.env.SetScriptMemory(n)
	default:
		if kv.SetTunable(key, value) {
			break // OBJECT ENCODING's thresholds (kv.Tunables)
		}
		if s.cfg.ConfigSet != nil {
			handled, err := s.cfg.ConfigSet(key, value)
			if handled && err != nil {
				return command.ConfigSetRefused(name, err)
			}
			if handled {
				break
			}
		}
		if cur, known := s.settings()[name]; known && cur == value {
			// A fixed setting (save, appendonly...) set to the value it
			// has changes nothing: accepted, as tools that save and
			// restore settings around their work set them back.
			break
		}
		return s.unknownSetting(name, failed)
	}
	switch key {
	case "maxmemory", "proto-max-bulk-len", "max-inline-len", "max-args", "script-memory-limit":
		// CONFIG GET answers in bytes (or a count), as Redis does.
		if n, err := memlimit.ParseMemory(value); err == nil {
			value = strconv.FormatInt(n, 10)
		}
	case "maxmemory-policy", "stop-writes-on-bgsave-error":
		value = strings.ToLower(value)
	}
	s.settingsMu.Lock()
	if s.cfg.Settings == nil {
		s.cfg.Settings = map[string]string{}
	}
	s.cfg.Settings[key] = value
	if key != name {
		s.cfg.Settings[name] = value
	}
	for alias, k := range settingAliases { // CONFIG GET of either name
		if k == key {
			s.cfg.Settings[alias] = value
		}
	}
	s.settingsMu.Unlock()
	return ""
}

// configSetFraming changes one framing limit of authenticated connections
// (the limits before AUTH stay fixed). Each connection applies it from its
// next read on; a command under way keeps the lengths it announced.
func (s *Server) configSetFraming(key, value string) string {
	n, err := memlimit.ParseMemory(value)
	if err != nil || n < 1 {
		return "argument must be a positive number of " + map[string]string{"max-args": "arguments", "proto-max-bulk-len": "bytes", "max-inline-len": "bytes"}[key]
	}
	s.mu.Lock() // serializes CONFIG SETs of the limits
	defer s.mu.Unlock()
	l := *s.guardLimits.Load()
	switch key {
	case "proto-max-bulk-len":
		if n > 1<<30 {
			return "argument must be between 1 and 1073741824"
		}
		l.MaxBulkLen = n
	case "max-args":
		if n > 1<<31-1 {
			return "argument must be between 1 and 2147483647"
		}
		l.MaxArgs = n
	case "max-inline-len":
		if n > 1<<30 {
			return "argument must be between 1 and 1073741824"
		}
		l.MaxInlineLen = int(n)
	}
	s.guardLimits.Store(&l)
	return ""
}

func (s *Server) unknownSetting(name string, failed func(string) string) string {
	if _, known := s.settings()[name]; known {
		return failed("can't set immutable config")
	}
	return command.UnknownSetting(name)
}

func (s *Server) logger() *slog.Logger {
	if s.cfg.Logger == nil {
		return discardLogger
	}
	return s.cfg.Logger
}

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// warnEvery is the shortest time between two warnings of one kind; the
// warnings in between are counted and the count reported with the next.
const warnEvery = 10 * time.Second

type warnState struct {
	last       time.Time
	suppressed int64
}

// warn logs a warning about a client's misbehaviour (failed AUTH, refused
// connection, protocol error) at most once per warnEvery per kind, so a
// misbehaving client cannot flood the log.
func (s *Server) warn(kind, msg string, attrs ...any) {
	now := time.Now()
	s.warnMu.Lock()
	if s.warns == nil {
		s.warns = map[string]*warnState{}
	}
	w := s.warns[kind]
	if w == nil {
		w = &warnState{}
		s.warns[kind] = w
	}
	if !w.last.IsZero() && now.Sub(w.last) < warnEvery {
		w.suppressed++
		s.warnMu.Unlock()
		return
	}
	suppressed := w.suppressed
	w.last, w.suppressed = now, 0
	s.warnMu.Unlock()
	if suppressed > 0 {
		attrs = append(attrs, "suppressed_since_last", suppressed)
	}
	s.logger().Warn(msg, attrs...)
}
