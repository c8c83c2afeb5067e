package cluster

import (
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// blockingLogs is a log store whose StoreLogs waits until release is
// closed, like a write into a frozen file system.
type blockingLogs struct {
	*raft.InmemStore
	release chan struct{}
}

func (b blockingLogs) StoreLogs(logs []*raft.Log) error {
	<-b.release
	return b.InmemStore.StoreLogs(logs)
}

// TestDiskStallStopsLeader pins issue 23's stalled disk: a leader whose
// log write does not return kept its leadership (and the cluster stalled)
// for as long as the disk did. The watchdog calls onFatal once, soon after
// the timeout, while the write is still blocked; on a follower it only
// counts the stall; a write that returns within the timeout is no stall.
func TestDiskStallStopsLeader(t *testing.T) {
	for _, leads := range []bool{true, false} {
		mem := raft.NewInmemStore()
		b := blockingLogs{mem, make(chan struct{})}
		closing := make(chan struct{})
		g := newDiskGuard(b, mem, t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)), closing)
		g.stallTimeout = 100 * time.Millisecond
		g.leading = func() bool { return leads }
		var calls atomic.Int64
		stalled := make(chan error, 4)
		g.onFatal = func(err error) { calls.Add(1); stalled <- err }
		done := make(chan struct{})
		go func() { defer close(done); g.stallWatch() }()

		// A write that returns in time.
		close(b.release)
		if err := g.StoreLogs([]*raft.Log{{Index: 1}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(250 * time.Millisecond) // two timeouts with no write in progress
		if n := g.stalls.Load(); n != 0 {
			t.Fatalf("leads=%v: %d stalls counted without a stalled write", leads, n)
		}

		b.release = make(chan struct{})
		g.LogStore = b
		start := time.Now()
		wrote := make(chan error, 1)
		go func() { wrote <- g.StoreLogs([]*raft.Log{{Index: 2}}) }()
		if leads {
			select {
			case err := <-stalled:
				if d := time.Since(start); d < g.stallTimeout {
					t.Errorf("onFatal after %v, before the timeout %v", d, g.stallTimeout)
				}
				t.Logf("stall reported after %v: %v", time.Since(start).Round(time.Millisecond), err)
			case <-time.After(5 * time.Second):
				t.Fatal("a leader's write blocked for 5s and onFatal was not called")
			}
			time.Sleep(300 * time.Millisecond) // still blocked: no second call
		} else {
			pollFor := time.Now().Add(5 * time.Second)
			for g.stalls.Load() == 0 && time.Now().Before(pollFor) {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if n := g.stalls.Load(); n != 1 {
			t.Errorf("leads=%v: %d stalls counted, want 1", leads, n)
		}
		if want := map[bool]int64{true: 1, false: 0}[leads]; calls.Load() != want {
			t.Errorf("leads=%v: onFatal called %d times, want %d", leads, calls.Load(), want)
		}
		close(b.release)
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
		close(closing)
		<-done
	}
}

// TestDiskStallIgnoresPause: a process that was paused (SIGSTOP, a
// suspended VM) resumes with a write in progress that began long ago by
// the wall clock; that is not a stalled disk. TestClusterLinearizable's
// paused leader exited with status 3 before the watchdog counted its own
// ticks. A write still in progress after ten ticks is a stall.
func TestDiskStallIgnoresPause(t *testing.T) {
	mem := raft.NewInmemStore()
	closing := make(chan struct{})
	defer close(closing)
	g := newDiskGuard(mem, mem, t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)), closing)
	g.stallTimeout = 200 * time.Millisecond // a tick every 20 ms
	g.leading = func() bool { return true }
	var calls atomic.Int64
	g.onFatal = func(error) { calls.Add(1) }
	go g.stallWatch()

	// As seen right after a resume: a write in progress for an hour.
	ticket := g.begin("log append")
	g.stallMu.Lock()
	g.inflight[ticket] = inflightWrite{op: "log append", since: time.Now().Add(-time.Hour)}
	g.stallMu.Unlock()
	time.Sleep(60 * time.Millisecond) // about three ticks
	g.end(ticket)
	if n := calls.Load(); n != 0 {
		t.Fatalf("a write that began an hour ago by the clock and finished within three ticks was taken for a stall (%d calls)", n)
	}

	// A write that stays in progress: a stall once ten ticks saw it.
	ticket = g.begin("log append")
	defer g.end(ticket)
	deadline := time.Now().Add(5 * time.Second)
	for calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("a write in progress past the timeout and ten ticks: %d calls, want 1", n)
	}
}
