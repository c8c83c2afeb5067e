package server

import (
	"path/filepath"
	"time"

	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/status"
)

// Snapshots at the edge: refusing writes after a failed save (MISCONF)
// and INFO's persistence section. SAVE, BGSAVE, LASTSAVE and SHUTDOWN are
// command's; all reach the snapshots through Config.Persistence, which
// cmd/rlserver sets when the server keeps snapshots (standalone mode).

// Persistence is what the persistence commands (command.Persistence) and
// INFO need from the snapshots.
type Persistence interface {
	command.Persistence
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

// refusesWrite reports whether cmd must get command.ErrMisconf: a command (or a
// container's subcommand) flagged write while Config.WriteStopper stops
// writes after a failed save. Reads (RL.PEEK, PTTL, INFO...) and PING
// still work: a health check that PINGs should not take a limiter that
// still decides reads out of rotation (Redis refuses PING too).
func (s *Server) refusesWrite(cmd *command.Cmd) bool {
	return cmd.Write && s.stopper != nil && s.stopper.StopWrites()
}

// writePersistenceInfo writes INFO's persistence section: Redis's field
// names where they apply, then rlserver's own (rl_*).
func (s *Server) writePersistenceInfo(kv func(k string, v any)) {
	kv("loading", 0)
	kv("async_loading", 0)
	p := s.cfg.Persistence
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
