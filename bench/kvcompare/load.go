package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rlserver/rlserver/bench/internal/benchproc"
	"github.com/rlserver/rlserver/bench/internal/respio"
)

// pattern is one way limiters use Redis, as the generator sends it.
type pattern struct {
	name   string // for the table
	unit   string // what one operation is
	prefix string // of its keys: prefix + decimal key number
	multi  bool   // MULTI, INCR, EXPIRE, EXEC; else INCRBY n, EXPIRE
	call   call   // -scripts: EVALSHA of the token bucket or RL.ALLOW
}

var (
	// envoy's ratelimit service (its Redis backend, radix client) sends
	// INCRBY key hits and EXPIRE key s for each descriptor, pipelined.
	envoy = pattern{name: "INCRBY+EXPIRE", unit: "pairs/s", prefix: "envoy:"}
	// Rack::Attack, Laravel and many hand-written limiters: INCR and
	// EXPIRE in a transaction.
	seeds = pattern{name: "MULTI INCR EXPIRE EXEC", unit: "tx/s", prefix: "tx:", multi: true}
)

// tally counts what the generator added to each key of one pattern on
// one server, from the replies it read: checked against the server's
// values afterwards.
type tally []atomic.Int64

// load is one run of the generator against one server.
type load struct {
	addr     string
	pid      int // the server's, for its CPU time
	pat      pattern
	conns    int
	depth    int // operations (pairs or transactions) per round trip
	keys     int
	ttl      int
	ramp     time.Duration // run before the measured window
	duration time.Duration // the measured window
	tally    tally
	seed     uint64
	bucket   *bucket // -scripts: the script's SHA1 and the bucket's parameters
}

// loadResult is a run's measured window: operations completed, its
// length, and the CPU time the server and this process spent in it.
type loadResult struct {
	all     int64 // operations completed in the whole run, ramp included
	ops     int64
	elapsed time.Duration
	srvCPU  time.Duration
	genCPU  time.Duration
	trips   int64 // round trips in the whole run
	reads   int64 // socket reads in the whole run
	// -scripts, over the whole run: error replies (the first one's text)
	// and calls denied.
	errs     int64
	firstErr string
	denied   int64
}

func (r loadResult) rate() float64 { return float64(r.ops) / r.elapsed.Seconds() }

// counter is one connection's completed operations, on its own cache
// line.
type counter struct {
	n atomic.Int64
	_ [56]byte
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// run drives conns connections, each sending depth operations on random
// keys per round trip and checking every reply, for ramp + duration, and
// returns the figures of the last duration.
func (l load) run(ctx context.Context) (loadResult, error) {
	conns := make([]*respio.Conn, l.conns)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range conns {
		c, err := respio.Dial(l.addr)
		if err != nil {
			return loadResult{}, err
		}
		conns[i] = c
	}
	counters := make([]counter, l.conns)
	var stop atomic.Bool
	var errOnce sync.Once
	var firstErr error
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		stop.Store(true)
	}
	var wg sync.WaitGroup
	workers := make([]*worker, len(conns))
	for i, c := range conns {
		w := &worker{load: &l, c: c, rng: rand.New(rand.NewPCG(l.seed, uint64(i)))}
		workers[i] = w
		rt := w.roundTrip
		if l.pat.call != callNone {
			rt = w.callTrip
		}
		wg.Go(func() {
			for !stop.Load() {
				if err := rt(); err != nil {
					fail(err)
					return
				}
				counters[i].n.Add(int64(l.depth))
			}
		})

	}
	sum := func() int64 {
		var n int64
		for i := range counters {
			n += counters[i].n.Load()
		}
		return n
	}
	sleep := func(d time.Duration) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			fail(ctx.Err())
		}
	}
	sleep(l.ramp)
	ops0, t0, srv0, gen0 := sum(), time.Now(), benchproc.CPUTimeWithChildren(l.pid), selfCPU()
	sleep(l.duration)
	ops1, t1, srv1, gen1 := sum(), time.Now(), benchproc.CPUTimeWithChildren(l.pid), selfCPU()
	stop.Store(true)
	// A connection blocked on a server that stopped answering must not
	// hang the run.
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
	}
	wg.Wait()
	if firstErr != nil {
		if errors.Is(firstErr, context.Canceled) || errors.Is(firstErr, context.DeadlineExceeded) {
			return loadResult{}, firstErr
		}
		return loadResult{}, fmt.Errorf("%s on %s: %w", l.pat.name, l.addr, firstErr)
	}
	res := loadResult{all: sum(), ops: ops1 - ops0, elapsed: t1.Sub(t0), srvCPU: srv1 - srv0, genCPU: gen1 - gen0}
	res.trips = res.all / int64(l.depth)
	for _, c := range conns {
		res.reads += c.Reads
	}
	for _, w := range workers {
		res.errs += w.errs
		res.denied += w.denied
		if res.firstErr == "" {
			res.firstErr = w.firstErr
		}
	}
	return res, nil
}

// worker is one connection of a run.
type worker struct {
	*load
	c     *respio.Conn
	rng   *rand.Rand
	batch []int // key numbers of the round trip
	adds  []int64
	key   []byte
	ttlB  []byte
	// -scripts
	errs     int64
	firstErr string
	denied   int64
}

// roundTrip sends depth operations in one write and reads and checks
// their replies: INCRBY's (INCR's) result at least the amount added,
// EXPIRE's 1 (the key exists: this connection just wrote it).
func (w *worker) roundTrip() error {
	if w.ttlB == nil {
		w.ttlB = strconv.AppendInt(nil, int64(w.ttl), 10)
	}
	w.batch, w.adds = w.batch[:0], w.adds[:0]
	b := w.c.Out[:0]
	for range w.depth {
		k := w.rng.IntN(w.keys)
		w.key = strconv.AppendInt(append(w.key[:0], w.pat.prefix...), int64(k), 10)
		add := int64(1)
		if w.pat.multi {
			b = append(b, "*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n"...)
			b = respio.AppendBulk(b, w.key)
		} else {
			// envoy adds the request's hits: mostly 1, sometimes more.
			add = int64(1 + w.rng.IntN(3))
			b = append(b, "*3\r\n$6\r\nINCRBY\r\n"...)
			b = respio.AppendBulk(b, w.key)
			b = append(b, '$', '1', '\r', '\n', byte('0'+add), '\r', '\n')
		}
		b = append(b, "*3\r\n$6\r\nEXPIRE\r\n"...)
		b = respio.AppendBulk(b, w.key)
		b = respio.AppendBulk(b, w.ttlB)
		if w.pat.multi {
			b = append(b, "*1\r\n$4\r\nEXEC\r\n"...)
		}
		w.batch = append(w.batch, k)
		w.adds = append(w.adds, add)
	}
	w.c.Out = b
	if err := w.c.Flush(); err != nil {
		return err
	}
	for i := range w.batch {
		if w.pat.multi {
			for _, want := range []string{"+OK", "+QUEUED", "+QUEUED", "*2"} {
				if err := w.c.Expect(want); err != nil {
					return err
				}
			}
		}
		v, err := w.c.ReadInt()
		if err != nil {
			return err
		}
		if v < w.adds[i] {
			return fmt.Errorf("INCRBY %s%d %d answered %d", w.pat.prefix, w.batch[i], w.adds[i], v)
		}
		if v, err := w.c.ReadInt(); err != nil || v != 1 {
			return fmt.Errorf("EXPIRE %s%d answered %d (%v), want 1", w.pat.prefix, w.batch[i], v, err)
		}
	}
	for i, k := range w.batch {
		w.tally[k].Add(w.adds[i])
	}
	return nil
}
