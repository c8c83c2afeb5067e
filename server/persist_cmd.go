package server

import (
	"context"
	"path/filepath"
	"time"

	"github.com/rlserver/rlserver/status"
)

// Persistence commands: SAVE, BGSAVE, LASTSAVE, SHUTDOWN and INFO's
// persistence section. They reach the snapshots through
// Config.Persistence, which cmd/rlserver sets when the server keeps
// snapshots (standalone mode); without it they answer with
// errNoPersistence.

// Persistence is what the persistence commands need from a Backend.
type Persistence interface {
	// Save writes a snapshot of the state as it is now and returns once it
	// is durable (SAVE).
	Save(ctx context.Context) error
	// BackgroundSave starts a save and returns at once; false means a save
	// is already running and nothing was started (BGSAVE).
	BackgroundSave() bool
	// LastSave is the time of the last successful save; the start-up time
	// before the first (LASTSAVE).
	LastSave() time.Time
	// Shutdown saves first when save is true (an error means it failed and
	// nothing stops), then makes the process stop gracefully, with a last
	// save unless save is false (SHUTDOWN).
	Shutdown(ctx context.Context, save bool) error
	// PersistenceStatus feeds INFO persistence.
	PersistenceStatus() status.Persistence
}

// WriteStopper is Config.WriteStopper: the snapshots, when they may
// refuse writes after a failed save (stop-writes-on-bgsave-error yes).
// StopWrites is asked for every write command, so it must be cheap
// (atomic loads).
type WriteStopper interface {
	// StopWrites reports whether write commands are refused now: the
	// option is on and the last save failed.
	StopWrites() bool
	// StopWritesOnSaveError reports the option, for INFO.
	StopWritesOnSaveError() bool
}

// refusesWrite reports whether cmd must get errMisconf: a command (or a
// container's subcommand) flagged write while Config.WriteStopper stops
// writes after a failed save. Reads (RL.PEEK, PTTL, INFO...) and PING
// still work: a health check that PINGs should not take a limiter that
// still decides reads out of rotation (Redis refuses PING too).
func (s *Server) refusesWrite(cmd *entry) bool {
	return cmd.write && s.stopper != nil && s.stopper.StopWrites()
}

func init() {
	register(
		&entry{name: "save", arity: 1, flags: []string{"admin", "noscript", "no_async_loading", "no_multi"}, acl: []string{"@admin", "@slow", "@dangerous"},
			summary: "Synchronously saves the limiter state to disk.", group: "server", since: "1.0.0", handler: cmdSave},
		&entry{name: "bgsave", arity: -1, flags: []string{"admin", "noscript", "no_async_loading"}, acl: []string{"@admin", "@slow", "@dangerous"},
			summary: "Asynchronously saves the limiter state to disk.", group: "server", since: "1.0.0", handler: cmdBgsave},
		&entry{name: "lastsave", arity: 1, flags: []string{"loading", "stale", "fast"}, acl: []string{"@admin", "@fast", "@dangerous"},
			summary: "Returns the Unix timestamp of the last successful save to disk.", group: "server", since: "1.0.0", handler: cmdLastsave},
		&entry{name: "shutdown", arity: -1, flags: []string{"admin", "noscript", "loading", "stale", "no_multi", "allow_busy"}, acl: []string{"@admin", "@slow", "@dangerous"},
			summary: "Saves the limiter state (unless NOSAVE) and stops the server.", group: "server", since: "1.0.0", handler: cmdShutdown},
	)
}

// persistence returns Config.Persistence: the snapshots, or nil.
func (s *Server) persistence() Persistence {
	return s.cfg.Persistence
}

func cmdSave(s *Server, c *client, _ [][]byte) outcome {
	p := s.persistence()
	switch {
	case p == nil:
		c.rep.error(errNoPersistence)
	case p.Save(context.Background()) != nil:
		c.rep.error(errSaveFailed)
	default:
		c.rep.conn.WriteString("OK")
	}
	return cmdOK
}

// cmdBgsave: BGSAVE [SCHEDULE]. As in Redis, SCHEDULE changes nothing
// while a snapshot is being saved: the reply is still an error.
func cmdBgsave(s *Server, c *client, args [][]byte) outcome {
	p := s.persistence()
	switch {
	case len(args) > 2 || (len(args) == 2 && !equalFold(args[1], "schedule")):
		c.rep.error(errSyntax)
	case p == nil:
		c.rep.error(errNoPersistence)
	case !p.BackgroundSave():
		c.rep.error(errBgsaveRunning)
	default:
		c.rep.conn.WriteString("Background saving started")
	}
	return cmdOK
}

func cmdLastsave(s *Server, c *client, _ [][]byte) outcome {
	p := s.persistence()
	if p == nil {
		c.rep.error(errNoPersistence)
		return cmdOK
	}
	c.rep.conn.WriteInt64(p.LastSave().Unix())
	return cmdOK
}

// cmdShutdown: SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]. It saves
// unless NOSAVE; a failed save keeps the server running (FORCE: stops
// anyway). On success, as in Redis, there is no reply: the connection
// closes and the process exits 0 once the other clients are drained.
// NOW changes nothing (there are no replicas to wait for); ABORT has
// nothing to abort, since a shutdown is not delayed.
func cmdShutdown(s *Server, c *client, args [][]byte) outcome {
	var nosave, save, force, abort bool
	for _, a := range args[1:] {
		switch {
		case equalFold(a, "nosave"):
			nosave = true
		case equalFold(a, "save"):
			save = true
		case equalFold(a, "now"):
		case equalFold(a, "force"):
			force = true
		case equalFold(a, "abort"):
			abort = true
		default:
			c.rep.error(errSyntax)
			return cmdOK
		}
	}
	if (nosave && save) || (abort && len(args) > 2) {
		c.rep.error(errSyntax)
		return cmdOK
	}
	if abort {
		c.rep.error(errNoShutdown)
		return cmdOK
	}
	p := s.persistence()
	if p == nil {
		c.rep.error(errNoPersistence)
		return cmdOK
	}
	ctx := context.Background()
	err := p.Shutdown(ctx, !nosave)
	if err != nil && force {
		err = p.Shutdown(ctx, false)
	}
	if err != nil {
		c.rep.error(errShutdownFailed)
		return cmdOK
	}
	return cmdQuit
}

// writePersistenceInfo writes INFO's persistence section: Redis's field
// names where they apply, then rlserver's own (rl_*).
func (s *Server) writePersistenceInfo(kv func(k string, v any)) {
	kv("loading", 0)
	kv("async_loading", 0)
	p := s.persistence()
	if p == nil {
		kv("rdb_changes_since_last_save", 0)
		kv("rdb_bgsave_in_progress", 0)
		kv("rdb_last_save_time", s.started.Unix())
		kv("rdb_last_bgsave_status", "ok")
		kv("aof_enabled", 0)
		kv("rl_snapshots", 0)
		return
	}
	st := p.PersistenceStatus()
	secs := func(d time.Duration) int64 {
		if d < 0 {
			return -1
		}
		return int64(d / time.Second)
	}
	bit := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	status := "ok"
	if !st.LastOK {
		status = "err"
	}
	current := time.Duration(-1)
	if st.InProgress {
		current = time.Since(st.BgStarted)
	}
	kv("rdb_changes_since_last_save", st.Changes)
	kv("rdb_bgsave_in_progress", bit(st.InProgress))
	kv("rdb_last_save_time", st.LastSave.Unix())
	kv("rdb_last_bgsave_status", status)
	kv("rdb_last_bgsave_time_sec", secs(st.LastBgDuration))
	kv("rdb_current_bgsave_time_sec", secs(current))
	kv("rdb_saves", st.Saves)
	kv("rdb_last_load_keys_loaded", st.LoadedKeys)
	kv("aof_enabled", 0)
	kv("rl_snapshots", 1)
	kv("rl_snapshot_dir", filepath.Dir(st.File))
	kv("rl_snapshot_file", filepath.Base(st.File))
	kv("rl_save_interval_ms", st.Interval.Milliseconds())
	kv("rl_last_save_duration_us", st.LastDuration.Microseconds())
	kv("rl_last_save_bytes", st.LastBytes)
	kv("rl_last_save_keys", st.LastKeys)
	kv("rl_save_failures", st.Failures)
	if ws := s.stopper; ws != nil {
		kv("rl_stop_writes_on_bgsave_error", yesNo(ws.StopWritesOnSaveError()))
		kv("rl_refusing_writes", bit(ws.StopWrites()))
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
