package script

import (
	"context"
	"errors"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// A script's bounds. gopher-lua has no memory accounting and runs a Go
// built-in to its end, so the sandbox bounds a run in three ways:
//
//   - every built-in that could be asked for unbounded work checks the
//     run's context as it goes (checkContext), so SCRIPT KILL, a memory
//     kill and shutdown stop it within milliseconds;
//   - no built-in makes a value larger than a quarter of the memory limit
//     (it raises "not enough memory", Lua's own text, before allocating):
//     building a value takes up to about three times its size for a
//     moment, which must fit under the watchdog's limit;
//   - a watchdog samples the process's heap while scripts run and ends
//     the runs during which the live heap grew by more than the limit
//     (memory built by the interpreter itself: concatenation, tables).
//
// DefaultMemoryLimit is the limit of an Engine that was not given one.
const DefaultMemoryLimit = 256 << 20

// MaxResults is LUAI_MAXCSTACK: the most values one call may push
// (unpack, string.byte, struct.unpack, cmsgpack.unpack...), counting its
// arguments, as Lua 5.1 checks it.
const MaxResults = 8000

// maxChunk is the largest source loadstring and load compile: the
// compiler cannot be stopped, and it uses many times the source's size.
const maxChunk = 8 << 20

func init() {
	// gopher-lua fills a table's array part with nils up to any integer
	// key below this, in one instruction nothing stops: t[2^25] = 1 took
	// 13 s and 1 GB at its default (2^26). Above it, keys go to the hash
	// part at once, as Lua 5.1 puts them. The cost: the length operator
	// counts only the array part, so #t stops at 4194303 for a longer
	// array (docs/scripts.md).
	lua.MaxArrayIndex = 1 << 22
}

// errMemory is the cause of a run ended by the watchdog.
var errMemory = errors.New("not enough memory")

// limits are the bounds every run of an Engine shares.
type limits struct {
	memory atomic.Int64 // bytes; <= 0: none
}

// maxBytes is the largest value a built-in may make: a quarter of the
// memory limit.
func (g *limits) maxBytes() int64 {
	if m := g.memory.Load(); m > 0 {
		return max(m/4, 1)
	}
	return 1 << 62
}

// outOfMemory raises Lua's memory error, without a position, as Lua 5.1
// raises it.
func outOfMemory(L *lua.LState) {
	L.Error(lua.LString(errMemory.Error()), 0)
}

// checkContext raises the run's end (SCRIPT KILL, the watchdog,
// shutdown) inside a built-in that works in a loop.
func checkContext(L *lua.LState) {
	ctx := L.Context()
	if ctx == nil {
		return
	}
	select {
	case <-ctx.Done():
		L.RaiseError("%s", context.Cause(ctx).Error())
	default:
	}
}

// ticker calls checkContext every 1024 ticks.
type ticker int

func (t *ticker) tick(L *lua.LState) {
	*t++
	if *t&1023 == 0 {
		checkContext(L)
	}
}

// watched is one run as the watchdog sees it. Only the watchdog reads
// and writes live, goal and armed.
type watched struct {
	cancel      context.CancelCauseFunc
	live, goal  int64
	armed       bool
	memoryEnded atomic.Bool
}

// watchdog samples the heap every watchTick while runs are active.
type watchdog struct {
	lim      *limits
	mu       sync.Mutex
	runs     map[*watched]struct{}
	watching bool
	list     []*watched // the watchdog's copy of runs
}

const watchTick = 2 * time.Millisecond

func (w *watchdog) add(r *watched) {
	w.mu.Lock()
	if w.runs == nil {
		w.runs = map[*watched]struct{}{}
	}
	w.runs[r] = struct{}{}
	if !w.watching && w.lim.memory.Load() > 0 {
		w.watching = true
		go w.watch()
	}
	w.mu.Unlock()
}

func (w *watchdog) remove(r *watched) {
	w.mu.Lock()
	delete(w.runs, r)
	w.mu.Unlock()
}

var heapSamples = []string{
	"/memory/classes/heap/objects:bytes", // live and not yet swept
	"/gc/heap/live:bytes",                // live as of the last collection
	"/gc/heap/goal:bytes",                // where the next collection starts
}

func readHeap(s []metrics.Sample) (heap, live, goal int64) {
	metrics.Read(s)
	return int64(s[0].Value.Uint64()), int64(s[1].Value.Uint64()), int64(s[2].Value.Uint64())
}

// watch ends the runs that grew the live heap by more than the limit. A
// run is armed at the first tick it is seen, with the live heap and the
// collector's goal of that moment; the heap passing max(goal, live) +
// limit is a suspicion (garbage alone stays under the goal), confirmed by
// a collection: the run ends if the live heap then exceeds its live
// baseline by more than the limit, and is re-armed at the new goal if
// not. It stops after a second with no run.
func (w *watchdog) watch() {
	t := time.NewTicker(watchTick)
	defer t.Stop()
	s := make([]metrics.Sample, len(heapSamples))
	for i, name := range heapSamples {
		s[i].Name = name
	}
	idle := 0
	for range t.C {
		limit := w.lim.memory.Load()
		w.mu.Lock()
		if len(w.runs) == 0 || limit <= 0 {
			idle++
			if idle >= int(time.Second/watchTick) || limit <= 0 {
				w.watching = false
				w.mu.Unlock()
				return
			}
			w.mu.Unlock()
			continue
		}
		idle = 0
		w.list = w.list[:0]
		for r := range w.runs {
			w.list = append(w.list, r)
		}
		w.mu.Unlock()
		heap, live, goal := readHeap(s)
		suspect := false
		for _, r := range w.list {
			if !r.armed {
				r.live, r.goal, r.armed = live, goal, true
				continue
			}
			if heap > max(r.goal, r.live)+limit {
				suspect = true
			}
		}
		if !suspect {
			continue
		}
		runtime.GC()
		_, live, goal = readHeap(s)
		for _, r := range w.list {
			if !r.armed {
				continue
			}
			if live-r.live > limit {
				r.memoryEnded.Store(true)
				r.cancel(errMemory)
			} else {
				r.goal = max(r.goal, goal)
			}
		}
	}
}
