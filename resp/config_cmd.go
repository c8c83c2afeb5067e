package resp

import (
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"
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
var settingAliases = map[string]string{"loglevel": "log-level"}

func configSetCommand() *command {
	return &command{name: "config|set", arity: -4, flags: []string{"admin", "noscript", "loading", "stale"}, acl: []string{"@admin", "@slow", "@dangerous"},
		summary: "Sets configuration parameters at run time: log-level, maxclients, max-key-len, proto-max-bulk-len, max-args, max-inline-len, save-interval, maxmemory, maxmemory-policy.", group: "server", since: "2.0.0",
		handler: cmdConfigSet}
}

// cmdConfigSet: CONFIG SET name value [name value ...]. Pairs are applied
// in order; the first that fails stops it with an error naming it (the
// ones before it stay applied).
func cmdConfigSet(s *Server, c *client, args [][]byte) outcome {
	if len(args)%2 != 0 {
		c.rep.error(wrongArity("config|set"))
		return cmdOK
	}
	for i := 2; i < len(args); i += 2 {
		name := strings.ToLower(string(args[i]))
		value := string(args[i+1])
		if text := s.configSet(name, value); text != "" {
			c.rep.error(text)
			return cmdOK
		}
		s.logger().Info("config set", "name", name, "value", value)
	}
	c.rep.conn.WriteString("OK")
	return cmdOK
}

// configSet applies one setting and records it for CONFIG GET; it returns
// an error reply's text.
func (s *Server) configSet(name, value string) string {
	failed := func(why string) string {
		return "ERR CONFIG SET failed (possibly related to argument '" + sanitize([]byte(name), 64) + "') - " + why
	}
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
	case "maxmemory", "maxmemory-policy": // maxmemory.go
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
	default:
		if s.cfg.ConfigSet == nil {
			return s.unknownSetting(name, failed)
		}
		handled, err := s.cfg.ConfigSet(key, value)
		if !handled {
			return s.unknownSetting(name, failed)
		}
		if err != nil {
			return failed(sanitize([]byte(err.Error()), 200))
		}
	}
	switch key {
	case "maxmemory", "proto-max-bulk-len", "max-inline-len", "max-args":
		// CONFIG GET answers in bytes (or a count), as Redis does.
		if n, err := ParseMemory(value); err == nil {
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
	s.settingsMu.Unlock()
	return ""
}

// configSetFraming changes one framing limit of authenticated connections
// (the limits before AUTH stay fixed). Each connection applies it from its
// next read on; a command under way keeps the lengths it announced.
func (s *Server) configSetFraming(key, value string) string {
	n, err := ParseMemory(value)
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
	return "ERR Unknown option or number of arguments for CONFIG SET - '" + sanitize([]byte(name), 64) + "'"
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
