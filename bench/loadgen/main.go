// Command loadgen offers rlserver (or Redis) a fixed rate of mixed limiter
// commands over many connections and reports latency percentiles: what
// redis-benchmark cannot do (one command per run, closed loop).
//
//	go run ./bench/loadgen -addr 127.0.0.1:6379 -conns 200 -rate 50000 -duration 10s
//	go run ./bench/loadgen -mix rl.allow=80,rl.peek=10,cl.throttle=10 -pipeline 4
//	go run ./bench/loadgen -keys 1 -mix rl.allow=1        # every connection on one hot key
//	go run ./bench/loadgen -addr 127.0.0.1:6380 -evalsha SHA -mix rl.allow=1
//	                       # Redis + bench/lua/token_bucket.lua: rl.allow becomes EVALSHA
//
// The load is open-loop: each connection has a schedule of send times fixed
// in advance (-rate split evenly over -conns, staggered), and sends each
// batch of -pipeline commands at its time whether or not earlier replies
// have come back. A command's latency is measured from its scheduled send
// time, not from when it was actually written, so a server (or generator)
// stall shows up in the percentiles for every command it delayed instead
// of silently lowering the offered rate (coordinated omission). The send
// lag (how late the generator itself wrote) is reported separately, so a
// generator that could not keep up is visible.
//
// Every run is bounded: -duration of sends, then at most -drain for the
// outstanding replies; at most -max-inflight unanswered commands per
// connection (beyond that its sends wait, and the wait counts as latency).
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

type config struct {
	addr        string
	conns       int
	rate        float64
	duration    time.Duration
	pipeline    int
	mix         string
	keys        int
	limit       int
	window      time.Duration
	evalsha     string
	password    string
	maxInflight int
	drain       time.Duration
	seed        uint64
}

func main() {
	var cfg config
	flag.StringVar(&cfg.addr, "addr", "127.0.0.1:6379", "server address (host:port)")
	flag.IntVar(&cfg.conns, "conns", 50, "connections")
	flag.Float64Var(&cfg.rate, "rate", 10_000, "offered load: commands per second, over all connections")
	flag.DurationVar(&cfg.duration, "duration", 10*time.Second, "how long to send")
	flag.IntVar(&cfg.pipeline, "pipeline", 1, "commands written together at each scheduled send")
	flag.StringVar(&cfg.mix, "mix", "rl.allow=60,rl.peek=10,cl.throttle=10,rl.fixed=10,rl.sliding=10",
		"commands and their weights: name=weight,...; names: "+strings.Join(opNames(), ", "))
	flag.IntVar(&cfg.keys, "keys", 100_000, "keys per kind of state, chosen uniformly at random (1: one hot key)")
	flag.IntVar(&cfg.limit, "limit", 100, "capacity / limit of every command")
	flag.DurationVar(&cfg.window, "window", 10*time.Second, "time to earn -limit tokens (rate = limit/window) and the window of RL.FIXED, RL.SLIDING, RL.LOG")
	flag.StringVar(&cfg.evalsha, "evalsha", "", "against Redis: send rl.allow as EVALSHA <sha> 1 key limit rate 1 (bench/lua/token_bucket.lua)")
	flag.StringVar(&cfg.password, "password", "", "AUTH password, if the server needs one")
	flag.IntVar(&cfg.maxInflight, "max-inflight", 10_000, "most unanswered commands per connection")
	flag.DurationVar(&cfg.drain, "drain", 5*time.Second, "longest wait for outstanding replies after the last send")
	flag.Uint64Var(&cfg.seed, "seed", 1, "random seed (key and command choice)")
	flag.Parse()
	if flag.NArg() > 0 {
		fail(fmt.Errorf("unexpected argument %q", flag.Arg(0)))
	}
	if err := run(cfg, os.Stdout); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "loadgen:", err)
	os.Exit(1)
}

// sample is one answered command: which op, how long from its scheduled
// send time, and how the server answered.
type sample struct {
	op      int
	latency int64
	outcome int8 // outcomeOK, outcomeDenied, outcomeError
}

const (
	outcomeOK = iota
	outcomeDenied
	outcomeError
)

// stats collects every connection's samples. Readers buffer samples and
// merge them here in blocks, so the lock is taken once per block.
type stats struct {
	mu       sync.Mutex
	perOp    []histogram
	all      histogram
	lag      histogram // how late the generator wrote, per batch
	count    []uint64
	denied   []uint64
	errs     []uint64
	firstErr []string
	sent     uint64
	lost     uint64 // sent but never answered (connection error or drain timeout)
	connErr  error
}

func run(cfg config, out io.Writer) error {
	if cfg.conns < 1 || cfg.conns > 100_000 {
		return errors.New("-conns must be between 1 and 100000")
	}
	if cfg.rate <= 0 || cfg.pipeline < 1 || cfg.keys < 1 || cfg.limit < 2 || cfg.window < time.Millisecond || cfg.maxInflight < 1 {
		return errors.New("-rate must be > 0, -pipeline and -keys >= 1, -limit >= 2, -window >= 1ms, -max-inflight >= 1")
	}
	if cfg.duration <= 0 || cfg.duration > time.Hour || cfg.drain < 0 {
		return errors.New("-duration must be in (0, 1h], -drain >= 0")
	}
	ops, weights, err := parseMix(cfg)
	if err != nil {
		return err
	}

	conns := make([]net.Conn, cfg.conns)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range conns {
		c, err := net.DialTimeout("tcp", cfg.addr, 5*time.Second)
		if err != nil {
			return fmt.Errorf("connection %d: %v", i+1, err)
		}
		conns[i] = c
		if cfg.password != "" {
			if err := auth(c, cfg.password); err != nil {
				return err
			}
		}
	}

	st := &stats{
		perOp: make([]histogram, len(ops)), count: make([]uint64, len(ops)),
		denied: make([]uint64, len(ops)), errs: make([]uint64, len(ops)), firstErr: make([]string, len(ops)),
	}
	// Per connection, one batch every interval; connections are staggered
	// evenly across the first interval.
	interval := time.Duration(float64(time.Second) * float64(cfg.pipeline) * float64(cfg.conns) / cfg.rate)
	if interval <= 0 {
		return errors.New("-rate too high for -conns and -pipeline")
	}
	start := time.Now().Add(50 * time.Millisecond)
	end := start.Add(cfg.duration)
	var wg sync.WaitGroup
	for i, c := range conns {
		pending := make(chan pend, cfg.maxInflight)
		offset := interval * time.Duration(i) / time.Duration(cfg.conns)
		rng := rand.New(rand.NewPCG(cfg.seed, uint64(i)))
		c.SetDeadline(end.Add(cfg.drain))
		wg.Go(func() { write(c, cfg, ops, weights, rng, start.Add(offset), interval, end, pending, st) })
		wg.Go(func() { read(c, ops, pending, st) })
	}
	wg.Wait()
	report(out, cfg, ops, st)
	return nil
}

// pend is one written command waiting for its reply.
type pend struct {
	sched int64 // scheduled send time, UnixNano
	op    int
}

// write sends batches on the connection's schedule until end. When it falls
// behind it writes every batch that is due at once (at most 64 per write).
func write(c net.Conn, cfg config, ops []op, weights []int, rng *rand.Rand, first time.Time, interval time.Duration, end time.Time, pending chan<- pend, st *stats) {
	defer close(pending)
	total := weights[len(weights)-1]
	buf := make([]byte, 0, 64<<10)
	var key []byte
	var batch []pend
	var lag histogram
	var sent uint64
	defer func() {
		st.mu.Lock()
		st.lag.merge(&lag)
		st.sent += sent
		st.mu.Unlock()
	}()
	for next := 0; ; {
		sched := first.Add(time.Duration(next) * interval)
		if !sched.Before(end) {
			return
		}
		if d := time.Until(sched); d > 0 {
			time.Sleep(d)
		}
		now := time.Now()
		buf, batch = buf[:0], batch[:0]
		for range 64 {
			s := first.Add(time.Duration(next) * interval)
			if !s.Before(end) || s.After(now) {
				break
			}
			lag.record(now.Sub(s).Nanoseconds())
			for range cfg.pipeline {
				w := rng.IntN(total)
				oi, _ := slices.BinarySearch(weights, w+1)
				o := &ops[oi]
				key = append(key[:0], o.keyPrefix...)
				key = strconv.AppendInt(key, int64(rng.IntN(cfg.keys)), 10)
				buf = o.appendCommand(buf, key)
				batch = append(batch, pend{s.UnixNano(), oi})
			}
			next++
		}
		if _, err := c.Write(buf); err != nil {
			st.mu.Lock()
			if st.connErr == nil {
				st.connErr = fmt.Errorf("write: %v", err)
			}
			st.mu.Unlock()
			return
		}
		sent += uint64(len(batch))
		for _, p := range batch {
			pending <- p
		}
	}
}

// read matches replies to pending commands in order and records them.
func read(c net.Conn, ops []op, pending <-chan pend, st *stats) {
	r := bufio.NewReaderSize(c, 64<<10)
	var buf []sample
	var firstErr []string
	flush := func() {
		st.mu.Lock()
		for _, s := range buf {
			st.perOp[s.op].record(s.latency)
			st.all.record(s.latency)
			st.count[s.op]++
			switch s.outcome {
			case outcomeDenied:
				st.denied[s.op]++
			case outcomeError:
				st.errs[s.op]++
			}
		}
		for i, e := range firstErr {
			if e != "" && st.firstErr[i] == "" {
				st.firstErr[i] = e
			}
		}
		st.mu.Unlock()
		buf, firstErr = buf[:0], nil
	}
	defer flush()
	for p := range pending {
		errText, first, hasFirst, err := readReply(r)
		if err != nil {
			// The rest will never be answered: count it, and drain the
			// channel so the writer is not blocked.
			lost := uint64(1)
			for range pending {
				lost++
			}
			st.mu.Lock()
			st.lost += lost
			if st.connErr == nil && !errors.Is(err, io.EOF) {
				st.connErr = fmt.Errorf("read: %v", err)
			} else if st.connErr == nil {
				st.connErr = errors.New("read: connection closed by the server")
			}
			st.mu.Unlock()
			return
		}
		s := sample{op: p.op, latency: time.Now().UnixNano() - p.sched}
		switch {
		case errText != "":
			s.outcome = outcomeError
			if firstErr == nil {
				firstErr = make([]string, len(ops))
			}
			if firstErr[p.op] == "" {
				firstErr[p.op] = errText
			}
		case hasFirst && first == ops[p.op].deniedFirst:
			s.outcome = outcomeDenied
		}
		buf = append(buf, s)
		if len(buf) == 1024 {
			flush()
		}
	}
}

// readReply reads one RESP2 reply. It returns the error text of an error
// reply, and for an array the first element when it is an integer (every
// limiter reply starts with its verdict).
func readReply(r *bufio.Reader) (errText string, first int64, hasFirst bool, err error) {
	line, err := readLine(r)
	if err != nil {
		return "", 0, false, err
	}
	switch line[0] {
	case '+', ':':
		return "", 0, false, nil
	case '-':
		return string(line[1:]), 0, false, nil
	case '$':
		n, err := strconv.Atoi(string(line[1:]))
		if err != nil {
			return "", 0, false, err
		}
		if n >= 0 {
			_, err = r.Discard(n + 2)
		}
		return "", 0, false, err
	case '*':
		n, err := strconv.Atoi(string(line[1:]))
		if err != nil {
			return "", 0, false, err
		}
		for i := range n {
			if i == 0 {
				b, err := r.Peek(1)
				if err != nil {
					return "", 0, false, err
				}
				if b[0] == ':' {
					l, err := readLine(r)
					if err != nil {
						return "", 0, false, err
					}
					first, err = strconv.ParseInt(string(l[1:]), 10, 64)
					if err != nil {
						return "", 0, false, err
					}
					hasFirst = true
					continue
				}
			}
			if _, _, _, err := readReply(r); err != nil {
				return "", 0, false, err
			}
		}
		return "", first, hasFirst, nil
	}
	return "", 0, false, fmt.Errorf("unexpected reply type %q", line[0])
}

// readLine returns one line without its CRLF; the slice is valid until the
// next read.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, errors.New("malformed reply line")
	}
	return line[:len(line)-2], nil
}

func auth(c net.Conn, password string) error {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(appendBulks([]byte("*2\r\n"), "AUTH", password)); err != nil {
		return err
	}
	errText, _, _, err := readReply(bufio.NewReaderSize(c, 512))
	if err == nil && errText != "" {
		err = errors.New("AUTH: " + errText)
	}
	return err
}

func report(w io.Writer, cfg config, ops []op, st *stats) {
	ms := func(ns uint64) string { return fmt.Sprintf("%.3f", float64(ns)/1e6) }
	answered := st.all.total
	fmt.Fprintf(w, "loadgen: %s, %d connections, offered %s commands/s for %v, pipeline %d, %d keys, mix %s\n",
		cfg.addr, cfg.conns, strconv.FormatFloat(cfg.rate, 'f', -1, 64), cfg.duration, cfg.pipeline, cfg.keys, cfg.mix)
	fmt.Fprintf(w, "sent %d (%.0f/s), answered %d, unanswered %d\n",
		st.sent, float64(st.sent)/cfg.duration.Seconds(), answered, st.sent-answered)
	fmt.Fprintf(w, "send lag (generator behind its schedule, per batch): p50 %s ms, p99 %s ms, max %s ms\n",
		ms(st.lag.quantile(0.5)), ms(st.lag.quantile(0.99)), ms(st.lag.max))
	expected := uint64(math.Floor(cfg.rate * cfg.duration.Seconds()))
	if float64(st.sent) < 0.95*float64(expected) || st.lag.quantile(0.99) > uint64(time.Millisecond) {
		fmt.Fprintln(w, "WARNING: the generator fell behind its schedule; latencies include its own delay (fewer -conns or a lower -rate)")
	}
	if st.connErr != nil {
		fmt.Fprintf(w, "WARNING: %v: %d commands never answered; they are not in the percentiles below, and each waited at least -drain (%v)\n", st.connErr, st.lost, cfg.drain)
	}
	fmt.Fprintln(w, "latency from the scheduled send time, in ms:")
	fmt.Fprintf(w, "%-12s %10s %8s %7s %9s %9s %9s %9s\n", "command", "answered", "errors", "denied", "p50", "p99", "p999", "max")
	var nErr uint64
	for i, o := range ops {
		h := &st.perOp[i]
		nErr += st.errs[i]
		fmt.Fprintf(w, "%-12s %10d %8d %6.1f%% %9s %9s %9s %9s\n", o.name, st.count[i], st.errs[i],
			100*float64(st.denied[i])/math.Max(1, float64(st.count[i])),
			ms(h.quantile(0.5)), ms(h.quantile(0.99)), ms(h.quantile(0.999)), ms(h.max))
	}
	fmt.Fprintf(w, "%-12s %10d %8d %7s %9s %9s %9s %9s\n", "all", answered, nErr, "",
		ms(st.all.quantile(0.5)), ms(st.all.quantile(0.99)), ms(st.all.quantile(0.999)), ms(st.all.max))
	for i, e := range st.firstErr {
		if e != "" {
			fmt.Fprintf(w, "first error from %s: %s\n", ops[i].name, e)
		}
	}
}
