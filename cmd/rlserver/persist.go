package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/persist"
	"github.com/rlserver/rlserver/status"
)

// Standalone snapshots: flags, loading at start, and the persistence
// commands' saver (declared to the server in capabilities.go).
type persistOptions struct {
	saveInterval   time.Duration
	discardCorrupt bool
	stopWrites     string // --stop-writes-on-bgsave-error: yes or no
}

func addPersistFlags(fs *flag.FlagSet, p *persistOptions) {
	fs.DurationVar(&p.saveInterval, "save-interval", time.Second, "standalone: time between snapshot saves while the state changes; a save that took d delays the next by at least 10*d (0: only on SAVE, BGSAVE and shutdown)")
	fs.StringVar(&p.stopWrites, "stop-writes-on-bgsave-error", "no", "standalone: yes refuses write commands (RL.ALLOW...) with MISCONF while the last snapshot save failed; no (default) keeps deciding from the exact state in memory and only reports the failure (INFO, metrics, log): see docs/persistence.md")
	fs.BoolVar(&p.discardCorrupt, "discard-corrupt-snapshot", false, "standalone: when the snapshot is corrupt or truncated, move it aside (renamed with a .corrupt-<time> suffix) and start empty instead of refusing to start")
}

func (p *persistOptions) check() error {
	if p.saveInterval < 0 {
		return fmt.Errorf("invalid value %v for --save-interval: must be 0 (off) or positive", p.saveInterval)
	}
	on, err := parseYesNo(p.stopWrites)
	if err != nil {
		return fmt.Errorf("invalid value %q for --stop-writes-on-bgsave-error: %v", p.stopWrites, err)
	}
	p.stopWrites = yesNo(on)
	return nil
}

// parseYesNo parses a Redis boolean setting: yes or no, in any case.
func parseYesNo(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "yes":
		return true, nil
	case "no":
		return false, nil
	}
	return false, errors.New("argument must be 'yes' or 'no'")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// openSnapshots loads the snapshot in dir into eng and starts saving.
func openSnapshots(o persistOptions, dir string, eng *engine.Engine, log *slog.Logger) (*snapshots, error) {
	store, err := persist.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("data folder %s: %v", dir, err)
	}
	crashBeforeRename(store)
	st, err := store.Load(context.Background(), eng, time.Now().UnixNano())
	switch {
	case err == nil:
		if st.Found {
			log.Info("snapshot loaded", "file", store.Path(), "keys", st.Records, "bytes", st.Bytes, "duration", st.Duration)
		}
	case errors.Is(err, persist.ErrNewerVersion):
		return nil, fmt.Errorf("%v; the file is left as it is: run a newer rlserver", err)
	case errors.Is(err, persist.ErrCorrupt) || errors.Is(err, persist.ErrTruncated):
		if !o.discardCorrupt {
			return nil, fmt.Errorf("%v; the file is left as it is (--discard-corrupt-snapshot moves it aside and starts empty)", err)
		}
		moved, merr := store.MoveAside(time.Now())
		if merr != nil {
			return nil, fmt.Errorf("%v; moving it aside failed: %v", err, merr)
		}
		log.Warn("snapshot damaged: moved aside, starting empty", "err", err, "moved_to", moved)
	default:
		return nil, fmt.Errorf("loading snapshot: %v", err)
	}
	p := &snapshots{saver: persist.NewSaver(store, eng, o.saveInterval, log), file: store.Path(), loaded: st.Records, policies: st.Policies}
	p.stopWritesOn.Store(o.stopWrites == "yes")
	return p, nil
}

// snapshots is the standalone saver as server.Persistence and
// server.WriteStopper.
type snapshots struct {
	saver    *persist.Saver
	file     string
	loaded   int
	policies [][]string // loaded with the snapshot, for the policy store (policies.go)

	// stopWritesOn is stop-writes-on-bgsave-error (CONFIG SET changes it).
	stopWritesOn atomic.Bool
}

// StopWrites reports whether write commands get MISCONF now: the option is
// on and the last save failed. Asked for every write command: two atomic
// loads.
func (p *snapshots) StopWrites() bool { return p.stopWritesOn.Load() && p.saver.Failing() }

// StopWritesOnSaveError reports the option.
func (p *snapshots) StopWritesOnSaveError() bool { return p.stopWritesOn.Load() }

func (p *snapshots) Save(ctx context.Context) error { return p.saver.Save(ctx) }
func (p *snapshots) BackgroundSave() bool           { return p.saver.BackgroundSave() }
func (p *snapshots) LastSave() time.Time            { return p.saver.LastSave() }
func (p *snapshots) Shutdown(ctx context.Context, save bool) error {
	return p.saver.Shutdown(ctx, save)
}

func (p *snapshots) PersistenceStatus() status.Persistence {
	st := p.saver.Status()
	return status.Persistence{
		File:           p.file,
		Interval:       st.Interval,
		Changes:        st.Changes,
		InProgress:     st.InProgress,
		BgStarted:      st.BgStarted,
		LastSave:       st.LastSave,
		LastOK:         st.LastOK,
		LastBgDuration: st.LastBgDuration,
		LastDuration:   st.LastDuration,
		LastBytes:      st.LastBytes,
		LastKeys:       st.LastKeys,
		Saves:          st.Saves,
		Failures:       st.Failures,
		LoadedKeys:     p.loaded,
	}
}

// shutdownRequested is closed by SHUTDOWN; nil (never ready) without
// snapshots.
func (p *snapshots) shutdownRequested() <-chan struct{} {
	if p == nil {
		return nil
	}
	return p.saver.ShutdownRequested()
}

// close makes the last save; see persist.Saver.Close.
func (p *snapshots) close() error {
	if p == nil {
		return nil
	}
	return p.saver.Close(context.Background())
}
