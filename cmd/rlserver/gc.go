package main

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The collector's setting. The heap is mostly long-lived limiter state,
// and Go's GOGC makes the heap's room for garbage a share of the live
// heap: at 1M keys GOGC=25 keeps the resident set small (measured: peak
// RSS per key 250-270 B at GOGC=100 -> 150-200 B with snapshots every
// second, 90-110 B -> 74-88 B without). But the collector's CPU per byte
// allocated is live/room: with a small live heap, GOGC=25 collects a few
// MB of room over and over, and a script (a few KB of garbage per call)
// spent about half its CPU collecting (issue 34). So the room is the
// larger of a quarter of the live heap (GOGC=25, unchanged at 1M keys)
// and gcRoomFloor: the percentage is set again after every collection
// from the live heap it found. GOGC or GOMEMLIMIT in the environment
// turn the tuning off (they win, as before).
//
// Measured (issue 34; the token bucket by EVALSHA at -P 32, GOGC=25
// against this, the same binary side by side): 16 MiB of room cut the
// server's CPU per call by about a third (30-40 us against 46-59 us),
// 32 MiB by a little more (29-35 against 46-51) at 20 MiB more resident
// memory. At 1M counters (46 MB live) 16 MiB is 4.5 MB more room than
// GOGC=25 gave: at most 4.5 B per key of garbage.
//
// With --maxmemory the Go heap is also held to it (GOMEMLIMIT): the
// heap is part of the used memory maxmemory bounds, so the room for
// garbage shrinks as the data grows toward the limit instead of adding
// gcRoomFloor on top of it. (CONFIG SET maxmemory later does not move
// it.)

// gcRoomFloor is the least room for garbage the collector keeps, bytes.
const gcRoomFloor = 16 << 20

// gcPercentMin is the percentage at a large live heap.
const gcPercentMin = 25

// tuneGC sets the collector's percentage now and keeps it fitted to the
// live heap in the background.
func tuneGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(gcPercent(0))
	go func() {
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
		var cycles uint64
		last := -1
		for range time.Tick(100 * time.Millisecond) {
			metrics.Read(sample)
			if sample[1].Value.Kind() != metrics.KindUint64 || sample[1].Value.Uint64() == cycles {
				continue
			}
			cycles = sample[1].Value.Uint64()
			if p := gcPercent(sample[0].Value.Uint64()); p != last {
				debug.SetGCPercent(p)
				last = p
			}
		}
	}()
}

// gcPercent is the percentage that gives a live heap of live bytes
// max(live/4, gcRoomFloor) of room, rounded to a step of 5 so that it
// does not change at every collection.
func gcPercent(live uint64) int {
	if live == 0 {
		live = 1 << 20
	}
	p := int(uint64(gcRoomFloor) * 100 / live)
	p -= p % 5
	return max(gcPercentMin, min(p, 800))
}

// limitHeap holds the Go heap to maxMemory bytes (--maxmemory; 0: no
// limit), unless GOMEMLIMIT or GOGC is set.
func limitHeap(maxMemory int64) {
	if maxMemory <= 0 || os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetMemoryLimit(maxMemory)
}
