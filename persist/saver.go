package persist

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/engine"
)

// Source is the state a Saver snapshots: *engine.Engine.
type Source interface {
	// Export copies every live record at nowNanos in bounded steps and
	// returns the state's clock (see engine.Engine.Export).
	Export(ctx context.Context, nowNanos int64, fn func(engine.Record) error) (clockNanos int64, err error)
	// Changes counts the writes so far; equal counts mean nothing changed.
	Changes() uint64
}

// Saver saves a Source to a Store: periodically while the state changes,
// on demand (SAVE, BGSAVE), and once more at Close. One save runs at a
// time. Its methods are safe for concurrent use.
type Saver struct {
	store    *Store
	src      Source
	interval time.Duration
	log      *slog.Logger
	now      func() int64 // ns since the epoch: the wall clock; tests fix it

	pols atomic.Pointer[polsBox] // nil: no policies (policies.go)

	saving  sync.Mutex // held for the whole of a save
	closed  bool       // guarded by saving: Close ran, the source may be gone
	bg      atomic.Bool
	failing atomic.Bool // the last save failed: Status().LastOK, read without the lock

	mu         sync.Mutex // guards the fields below
	st         Status
	savedAt    uint64 // Changes() when the last successful save started
	sizes      sizes  // of the last capture: room to make in the next
	bgStart    time.Time
	noFinal    bool // SHUTDOWN NOSAVE
	lastLogged time.Time

	closeOnce sync.Once
	closeErr  error
	stop      chan struct{} // closed by Close: the periodic loop ends
	loopDone  chan struct{}
	shutOnce  sync.Once
	shutdown  chan struct{}      // closed by Shutdown
	retime    chan time.Duration // SetInterval to the periodic loop
}

// Status is what INFO persistence reports.
type Status struct {
	LastSave       time.Time     // last successful save; the start-up time before the first
	LastOK         bool          // the last save (of any kind) succeeded
	LastDuration   time.Duration // of the last successful save
	LastCapture    time.Duration // of its copy and sort (the rest is writing)
	LastBytes      int64         // file size of the last successful save
	LastKeys       int           // records in the last successful save
	LastBgDuration time.Duration // of the last background save, -1 before the first
	Saves          int64         // successful saves since start
	Failures       int64         // failed saves since start
	Changes        uint64        // writes since the last successful save started
	InProgress     bool          // a background (BGSAVE or periodic) save is running
	BgStarted      time.Time     // when the running background save started
	Interval       time.Duration // between periodic saves; 0: off
}

// NewSaver returns a saver of src to store, whose state is taken as saved
// now (what was loaded at start-up, or nothing). With interval > 0 it saves
// every interval while anything changed, until Close.
func NewSaver(store *Store, src Source, interval time.Duration, log *slog.Logger) *Saver {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Saver{
		store: store, src: src, interval: interval, log: log,
		now:      func() int64 { return time.Now().UnixNano() },
		savedAt:  src.Changes(),
		stop:     make(chan struct{}),
		loopDone: make(chan struct{}),
		shutdown: make(chan struct{}),
		retime:   make(chan time.Duration),
	}
	s.st = Status{LastSave: time.Now(), LastOK: true, LastBgDuration: -1, Interval: interval}
	go s.loop()
	return s
}

// SetInterval changes the time between periodic saves (0: off) from now on
// (CONFIG SET save-interval).
func (s *Saver) SetInterval(d time.Duration) {
	s.mu.Lock()
	s.st.Interval = d
	s.mu.Unlock()
	select {
	case s.retime <- d:
	case <-s.loopDone:
	}
}

func (s *Saver) loop() {
	defer close(s.loopDone)
	t := time.NewTicker(time.Hour)
	t.Stop()
	if s.interval > 0 {
		t.Reset(s.interval)
	}
	defer t.Stop()
	var next time.Time // no periodic save before this (periodicShare)
	for {
		select {
		case <-s.stop:
			return
		case d := <-s.retime:
			t.Stop()
			if d > 0 {
				t.Reset(d)
			}
			continue
		case <-t.C:
		}
		if time.Now().Before(next) {
			continue
		}
		if s.dirty() && s.saving.TryLock() {
			start := time.Now()
			s.background()
			next = start.Add(periodicShare * time.Since(start))
		}
	}
}

// periodicShare bounds the share of time periodic saves take: after a
// periodic save that took d, the next starts no sooner than periodicShare*d
// after it started, so saves busy a core at most a tenth of the time however
// large the state (a million keys take most of a second to save; saving them
// every second would keep a core busy).
const periodicShare = 10

// dirty reports whether anything changed since the last successful save
// started.
func (s *Saver) dirty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changes() != s.savedAt
}

// Save writes a snapshot of the state as it is now and returns when it is
// durable. A save already running is waited for first, since it may have
// copied the state before the call.
func (s *Saver) Save(ctx context.Context) error {
	s.saving.Lock()
	defer s.saving.Unlock()
	if s.closed {
		return ErrClosed
	}
	return s.save(ctx, false)
}

// ErrClosed means the Saver was closed.
var ErrClosed = errors.New("snapshot saver closed")

// BackgroundSave starts a save and returns at once; it reports false, and
// starts nothing, when a save is already running.
func (s *Saver) BackgroundSave() bool {
	if !s.saving.TryLock() {
		return false
	}
	if s.closed {
		s.saving.Unlock()
		return false
	}
	s.bg.Store(true) // before returning, so INFO shows it at once
	s.mu.Lock()
	s.bgStart = time.Now()
	s.mu.Unlock()
	go s.background()
	return true
}

// background runs a save with s.saving held, and releases it.
func (s *Saver) background() {
	defer s.saving.Unlock()
	start := time.Now()
	if !s.bg.Swap(true) {
		s.mu.Lock()
		s.bgStart = start
		s.mu.Unlock()
	}
	s.save(context.Background(), true)
	s.mu.Lock()
	s.st.LastBgDuration = time.Since(start)
	s.mu.Unlock()
	s.bg.Store(false)
}

// save captures and writes a snapshot; the caller holds s.saving.
func (s *Saver) save(ctx context.Context, bg bool) error {
	start := time.Now()
	base := s.changes()
	s.mu.Lock()
	hint := s.sizes
	s.mu.Unlock()
	c, h, err := captureState(ctx, s.src, s.now(), hint)
	defer c.release() // the capture is off the heap (capture.go)
	if pols := s.policySource(); pols != nil {
		h.Policies = pols.Defs()
	}
	captured := time.Since(start)
	var size int64
	if err == nil {
		size, err = s.store.write(h, func(e *Encoder) error {
			for i := range c.ents {
				if err := e.Write(c.record(i)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.st.LastOK = false
		s.failing.Store(true)
		s.st.Failures++
		// A failing disk fails every second: log the first failure and
		// then at most once a minute.
		if time.Since(s.lastLogged) >= time.Minute || s.st.Failures == 1 {
			s.lastLogged = time.Now()
			s.log.Error("snapshot save failed", "file", s.store.Path(), "err", err, "failures", s.st.Failures)
		}
		return fmt.Errorf("saving %s: %w", s.store.Path(), err)
	}
	if !s.st.LastOK {
		s.log.Info("snapshot saves work again", "file", s.store.Path())
	}
	s.savedAt = base
	s.st.LastOK = true
	s.failing.Store(false)
	s.st.LastSave = time.Now()
	s.st.LastDuration = time.Since(start)
	s.st.LastCapture = captured
	s.st.LastBytes = size
	s.st.LastKeys = len(c.ents)
	s.sizes = c.sizes()
	s.st.Saves++
	// Periodic and BGSAVE saves log at debug level (one a second by
	// default); SAVE, SHUTDOWN's and the final save are lifecycle events.
	level := slog.LevelDebug
	if !bg {
		level = slog.LevelInfo
	}
	s.log.Log(ctx, level, "snapshot saved", "file", s.store.Path(), "keys", len(c.ents), "bytes", size, "duration", s.st.LastDuration, "background", bg)
	return nil
}

// Failing reports whether the last save failed (until one succeeds). It
// takes no lock: a server may ask it for every write command
// (stop-writes-on-bgsave-error).
func (s *Saver) Failing() bool { return s.failing.Load() }

// Status reports the saves so far.
func (s *Saver) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.Changes = s.changes() - s.savedAt
	st.InProgress = s.bg.Load()
	if st.InProgress {
		st.BgStarted = s.bgStart
	}
	return st
}

// LastSave is the time of the last successful save (the start-up time
// before the first, as Redis's LASTSAVE).
func (s *Saver) LastSave() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.LastSave
}

// ErrShutdownSave means SHUTDOWN's save failed: the server keeps running.
var ErrShutdownSave = errors.New("save before shutdown failed")

// Shutdown is SHUTDOWN: with save, it saves now and fails (stopping
// nothing) if that fails; without, Close will not save either. Then it
// closes ShutdownRequested, which tells the process to stop gracefully.
func (s *Saver) Shutdown(ctx context.Context, save bool) error {
	if save {
		if err := s.Save(ctx); err != nil {
			return fmt.Errorf("%w: %w", ErrShutdownSave, err)
		}
	} else {
		s.mu.Lock()
		s.noFinal = true
		s.mu.Unlock()
	}
	s.shutOnce.Do(func() { close(s.shutdown) })
	return nil
}

// ShutdownRequested is closed once SHUTDOWN succeeded.
func (s *Saver) ShutdownRequested() <-chan struct{} { return s.shutdown }

// Close stops the periodic saves, waits for a running save, and saves a
// last time when anything changed since the last save (unless SHUTDOWN
// NOSAVE asked not to). Call it once the server accepts no more commands
// and before the engine closes. Later calls return the first one's result.
func (s *Saver) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.loopDone
		s.saving.Lock()
		defer s.saving.Unlock()
		s.closed = true
		s.mu.Lock()
		skip := s.noFinal || s.changes() == s.savedAt
		s.mu.Unlock()
		if !skip {
			s.closeErr = s.save(ctx, false)
		}
	})
	return s.closeErr
}
