package main

// -scripts (make bench-lua): the Lua token bucket limiters run on Redis
// today, by EVALSHA on rlserver and on Redis, and rlserver's own RL.ALLOW
// with the same capacity and rate, side by side in one run (issue 21,
// "Figures to report").

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/rlserver/rlserver/bench/internal/benchproc"
	"github.com/rlserver/rlserver/bench/internal/respio"
)

//go:embed token_bucket.lua
var tokenBucketLua string

// call is what a -scripts pattern sends.
type call int

const (
	callNone    call = iota
	callEvalSHA      // EVALSHA <sha> 1 key capacity rate now_ms 1
	callAllow        // RL.ALLOW key capacity rate 1
)

var (
	evalsha = pattern{name: "EVALSHA token bucket", unit: "calls/s", prefix: "tb:", call: callEvalSHA}
	allow   = pattern{name: "RL.ALLOW", unit: "calls/s", prefix: "rl:", call: callAllow}
)

// target is one column of the scripts table: a pattern on a server.
type target struct {
	name string
	srv  int // index in servers
	pat  pattern
}

var scriptTargets = [3]target{
	{"rlserver EVALSHA", 0, evalsha},
	{"Redis EVALSHA", 1, evalsha},
	{"rlserver RL.ALLOW", 0, allow},
}

// bucket is the limiter every call asks: the script's SHA1 and the
// parameters, the same for the script and RL.ALLOW.
type bucket struct {
	sha      []byte
	capacity int64
	rate     float64
	capB     []byte
	rateB    []byte
}

func newBucket(sha string, capacity int64, rate float64) *bucket {
	return &bucket{sha: []byte(sha), capacity: capacity, rate: rate,
		capB: strconv.AppendInt(nil, capacity, 10), rateB: strconv.AppendFloat(nil, rate, 'g', -1, 64)}
}

// scriptTTL is the PEXPIRE the script sets, in ms.
func (b *bucket) scriptTTL() int64 {
	return int64(math.Ceil(float64(b.capacity)/b.rate*1000)) + 1000
}

// callTrip sends depth calls of cost 1 on random keys in one write and
// reads and checks their replies: the script's {allowed, tokens,
// retry_ms}, RL.ALLOW's {allowed, remaining, retry_after_ms,
// reset_after_ms}; allowed is 0 or 1, the tokens left within [0,
// capacity], a wait only when denied. An error reply is counted (the
// first one kept) and the run goes on; a reply out of range ends it.
func (w *worker) callTrip() error {
	b, bk := w.c.Out[:0], w.bucket
	nowB := strconv.AppendInt(nil, time.Now().UnixMilli(), 10)
	w.batch = w.batch[:0]
	for range w.depth {
		k := w.rng.IntN(w.keys)
		w.key = strconv.AppendInt(append(w.key[:0], w.pat.prefix...), int64(k), 10)
		if w.pat.call == callEvalSHA {
			b = append(b, "*8\r\n$7\r\nEVALSHA\r\n"...)
			b = respio.AppendBulk(b, bk.sha)
			b = append(b, "$1\r\n1\r\n"...)
			b = respio.AppendBulk(b, w.key)
			b = respio.AppendBulk(b, bk.capB)
			b = respio.AppendBulk(b, bk.rateB)
			b = respio.AppendBulk(b, nowB)
		} else {
			b = append(b, "*5\r\n$8\r\nRL.ALLOW\r\n"...)
			b = respio.AppendBulk(b, w.key)
			b = respio.AppendBulk(b, bk.capB)
			b = respio.AppendBulk(b, bk.rateB)
		}
		b = append(b, "$1\r\n1\r\n"...)
		w.batch = append(w.batch, k)
	}
	w.c.Out = b
	if err := w.c.Flush(); err != nil {
		return err
	}
	n := 3
	if w.pat.call == callAllow {
		n = 4
	}
	var v [4]int64
	for _, k := range w.batch {
		if err := w.c.Expect("*" + strconv.Itoa(n)); err != nil {
			if se, ok := err.(respio.ServerError); ok {
				w.errs++
				if w.firstErr == "" {
					w.firstErr = string(se)
				}
				continue
			}
			return err
		}
		for i := range n {
			x, err := w.c.ReadInt()
			if err != nil {
				return fmt.Errorf("%s%d: reply element %d: %w", w.pat.prefix, k, i+1, err)
			}
			v[i] = x
		}
		allowed, left, retry := v[0], v[1], v[2]
		if allowed != 0 && allowed != 1 || left < 0 || left > bk.capacity || retry < 0 ||
			(allowed == 1) != (retry == 0) || n == 4 && (v[3] < 0 || v[3] > int64(math.Ceil(float64(bk.capacity)/bk.rate*1000))) {
			return fmt.Errorf("%s %s%d answered %v", w.pat.name, w.pat.prefix, k, v[:n])
		}
		if allowed == 0 {
			w.denied++
		}
		w.tally[k].Add(1)
	}
	return nil
}

// scriptResult is everything -scripts checked besides the rates.
type scriptResult struct {
	sha      string
	capacity int64
	rate     float64
	keys     [3]keyCheck // per target, the keys read back
	seq      seqCheck
	exists   [2]bool // SCRIPT EXISTS on each server after the run
}

// keyCheck is the read-back of one target's keys.
type keyCheck struct {
	keys, called, present int
	tokens                float64 // sum over the keys present
	bad                   []string
}

// seqCheck is the same sequence of calls, with the clock and cost given,
// sent to both servers: every reply and the hash left must be equal.
type seqCheck struct {
	calls, denied int
	diffs         []string
}

// runScripts is -scripts' phase: the three targets at each depth, then
// the checks.
func runScripts(ctx context.Context, cfg config, rep *report, srv servers) error {
	sum := sha1.Sum([]byte(tokenBucketLua))
	want := hex.EncodeToString(sum[:])
	for s := range srv {
		c, err := respio.Dial(srv[s].Addr)
		if err != nil {
			return err
		}
		got, err := c.Do("SCRIPT", "LOAD", tokenBucketLua)
		c.Close()
		if err != nil || got != want {
			return fmt.Errorf("SCRIPT LOAD on %s: %v (%v), want %s", serverNames[s], got, err, want)
		}
	}
	bk := newBucket(want, cfg.capacity, cfg.rate)
	sr := &scriptResult{sha: want, capacity: cfg.capacity, rate: cfg.rate}
	rep.scripts = sr
	var tallies [3]tally
	for i := range tallies {
		tallies[i] = make(tally, cfg.keys)
	}
	for _, depth := range cfg.depths {
		c := caseResult{pat: evalsha, depth: depth}
		base := load{conns: cfg.conns, depth: depth, keys: cfg.keys, bucket: bk,
			ramp: min(250*time.Millisecond, cfg.duration/10)}
		for t, tg := range scriptTargets {
			l := base
			l.addr, l.pid, l.pat, l.tally = srv[tg.srv].Addr, srv[tg.srv].Pid(), tg.pat, tallies[t]
			l.ramp, l.duration, l.seed = 0, max(cfg.warmup, time.Millisecond), uint64(1000+t)
			res, err := l.run(ctx)
			if err != nil {
				return alive(srv, err)
			}
			c.warmErrs[t], c.warmFirst[t] = res.errs, res.firstErr
		}
		for r := range cfg.rounds {
			// Rotate which target goes first.
			for i := range scriptTargets {
				t := (i + r) % len(scriptTargets)
				tg := scriptTargets[t]
				l := base
				l.addr, l.pid, l.pat, l.tally = srv[tg.srv].Addr, srv[tg.srv].Pid(), tg.pat, tallies[t]
				l.duration, l.seed = cfg.duration, uint64(r*10+t)
				res, err := l.run(ctx)
				if err != nil {
					return alive(srv, err)
				}
				*c.of(t) = append(*c.of(t), res)
				cfg.logf("-P %-2d round %d %-18s %10.0f calls/s  server %5.0f ns/call  generator %4.0f ns/call, %.2f reads/round trip, %d denied, %d error replies %s",
					depth, r+1, tg.name, res.rate(), perOp(res.srvCPU, res.ops), perOp(res.genCPU, res.ops),
					float64(res.reads)/float64(max(res.trips, 1)), res.denied, res.errs, res.firstErr)
			}
		}
		rep.cases = append(rep.cases, c)
	}
	for t, tg := range scriptTargets {
		kc, err := checkKeys(srv[tg.srv].Addr, tg.pat, bk, tallies[t], cfg.verifyKeys)
		if err != nil {
			return alive(srv, fmt.Errorf("reading %s's keys back: %w", tg.name, err))
		}
		sr.keys[t] = kc
	}
	seq, err := compareSequence(srv)
	if err != nil {
		return alive(srv, fmt.Errorf("the call sequence: %w", err))
	}
	sr.seq = seq
	for s := range srv {
		c, err := respio.Dial(srv[s].Addr)
		if err != nil {
			return err
		}
		v, err := c.Do("SCRIPT", "EXISTS", want)
		c.Close()
		a, _ := v.([]any)
		sr.exists[s] = err == nil && len(a) == 1 && a[0] == int64(1)
	}
	return nil
}

// checkKeys reads back n of a target's keys spread evenly: a key the
// generator never called must not exist; a key present holds tokens in
// [0, capacity] (the script's hash: ts not after now, PTTL within the
// script's; RL.ALLOW's bucket: RL.PEEK with cost 0, PTTL within
// capacity/rate). A key called may have expired since.
func checkKeys(addr string, pat pattern, bk *bucket, t tally, n int) (keyCheck, error) {
	var kc keyCheck
	n = min(n, len(t))
	if n == 0 {
		return kc, nil
	}
	c, err := respio.Dial(addr)
	if err != nil {
		return kc, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Minute))
	keys := make([]int, n)
	for i := range keys {
		keys[i] = int(int64(i) * int64(len(t)) / int64(n))
	}
	ttl := bk.scriptTTL()
	if pat.call == callAllow {
		ttl = int64(math.Ceil(float64(bk.capacity) / bk.rate * 1000))
	}
	capS, rateS := string(bk.capB), string(bk.rateB)
	bad := func(format string, args ...any) { kc.bad = append(kc.bad, fmt.Sprintf(format, args...)) }
	for batch := range slices.Chunk(keys, 500) {
		for _, k := range batch {
			key := pat.prefix + strconv.Itoa(k)
			if pat.call == callEvalSHA {
				c.Send("HMGET", key, "tokens", "ts")
			} else {
				c.Send("RL.PEEK", key, capS, rateS, "0")
			}
			c.Send("PTTL", key)
		}
		if err := c.Flush(); err != nil {
			return kc, err
		}
		now := time.Now().UnixMilli()
		for _, k := range batch {
			key := pat.prefix + strconv.Itoa(k)
			state, err := c.Read()
			if err != nil {
				return kc, fmt.Errorf("%s: %w", key, err)
			}
			pv, err := c.Read()
			if err != nil {
				return kc, fmt.Errorf("PTTL %s: %w", key, err)
			}
			pttl, _ := pv.(int64)
			kc.keys++
			called := t[k].Load() > 0
			if called {
				kc.called++
			}
			a, _ := state.([]any)
			missing := pat.call == callEvalSHA && len(a) == 2 && a[0] == nil && a[1] == nil
			switch {
			case !called && (pttl != -2 || pat.call == callEvalSHA && !missing):
				bad("%s: never called, but PTTL %d, %v", key, pttl, state)
				continue
			case pttl == -2:
				// Missing (the script's HMGET gives two nils, RL.PEEK a
				// full bucket), or expired between the two reads.
				continue
			case missing:
				// PTTL is read after HMGET: a key cannot come back.
				bad("%s: HMGET %v, then PTTL %d", key, state, pttl)
				continue
			}
			kc.present++
			// Redis answers 0 in a key's last millisecond.
			if pttl < 0 || pttl > ttl {
				bad("%s: PTTL %d, want 0..%d", key, pttl, ttl)
			}
			var tokens float64
			if pat.call == callEvalSHA {
				if len(a) != 2 {
					bad("%s: HMGET %v", key, state)
					continue
				}
				ts, _ := a[1].(string)
				tok, _ := a[0].(string)
				tsN, err1 := strconv.ParseFloat(ts, 64)
				tokN, err2 := strconv.ParseFloat(tok, 64)
				if err1 != nil || err2 != nil || tsN > float64(now) {
					bad("%s: HMGET %v at %d ms", key, state, now)
					continue
				}
				tokens = tokN
			} else {
				if len(a) != 4 {
					bad("%s: RL.PEEK %v", key, state)
					continue
				}
				r, _ := a[1].(int64)
				tokens = float64(r)
			}
			if tokens < 0 || tokens > float64(bk.capacity) {
				bad("%s: %g tokens, capacity %d", key, tokens, bk.capacity)
			}
			kc.tokens += tokens
		}
	}
	return kc, nil
}

// compareSequence sends the same calls of the script to both servers, on
// fresh keys, with the clock and the cost given (the script takes now as
// an argument, so its answers are a function of the calls): buckets of
// several capacities and fractional rates, drained past empty by costs up
// to 7 and refilled by steps from 1 ms to 0.9 s. Every reply and the hash
// each bucket is left with (its fields as stored) must be the same.
func compareSequence(srv servers) (seqCheck, error) {
	var sc seqCheck
	type bucketCase struct {
		capacity, rate string
		step           int64 // ms between calls
	}
	cases := []bucketCase{{"10", "5", 37}, {"3", "0.3", 900}, {"100", "10", 1}, {"7", "2.5", 113}, {"1", "1000", 1}, {"50", "0.001", 250}}
	const calls = 60
	base := time.Now().UnixMilli() - 60_000
	var conns [2]*respio.Conn
	for s := range srv {
		c, err := respio.Dial(srv[s].Addr)
		if err != nil {
			return sc, err
		}
		defer c.Close()
		conns[s] = c
	}
	sha := hex.EncodeToString(func() []byte { h := sha1.Sum([]byte(tokenBucketLua)); return h[:] }())
	for i, bc := range cases {
		key := fmt.Sprintf("tbseq:%d", i)
		for _, c := range conns {
			if _, err := c.Do("DEL", key); err != nil {
				return sc, err
			}
		}
		for j := range calls {
			now := strconv.FormatInt(base+int64(j)*bc.step, 10)
			cost := strconv.Itoa(1 + (j*(i+3))%7)
			var got [2]string
			for s, c := range conns {
				v, err := c.Do("EVALSHA", sha, "1", key, bc.capacity, bc.rate, now, cost)
				if err != nil {
					return sc, fmt.Errorf("%s: EVALSHA %s %s %s %s %s: %w", serverNames[s], key, bc.capacity, bc.rate, now, cost, err)
				}
				got[s] = fmt.Sprint(v)
				if a, ok := v.([]any); ok && len(a) == 3 && a[0] == int64(0) && s == 0 {
					sc.denied++
				}
			}
			sc.calls++
			if got[0] != got[1] {
				sc.diffs = append(sc.diffs, fmt.Sprintf("%s call %d (capacity %s, rate %s, now %s, cost %s): rlserver %s, Redis %s",
					key, j+1, bc.capacity, bc.rate, now, cost, got[0], got[1]))
			}
		}
		var got [2]string
		for s, c := range conns {
			v, err := c.Do("HMGET", key, "tokens", "ts")
			if err != nil {
				return sc, err
			}
			got[s] = fmt.Sprintf("%q", v)
		}
		if got[0] != got[1] {
			sc.diffs = append(sc.diffs, fmt.Sprintf("%s left HMGET tokens ts: rlserver %s, Redis %s", key, got[0], got[1]))
		}
	}
	return sc, nil
}

// scriptsFailed lists what -scripts found wrong: error replies, values
// out of range in the keys read back, the two servers answering the same
// calls differently, the script gone from a server's cache.
func (r *report) scriptsFailed() []error {
	sr := r.scripts
	if sr == nil {
		return nil
	}
	var errs []error
	for _, c := range r.cases {
		for t, tg := range scriptTargets {
			n, first := c.warmErrs[t], c.warmFirst[t]
			for _, run := range *c.of(t) {
				n += run.errs
				if first == "" {
					first = run.firstErr
				}
			}
			if n > 0 {
				errs = append(errs, fmt.Errorf("%s -P %d: %d error replies, the first %q", tg.name, c.depth, n, first))
			}
		}
	}
	for t, kc := range sr.keys {
		if len(kc.bad) > 0 {
			errs = append(errs, fmt.Errorf("%s: %d of %d keys read back are wrong, first: %s", scriptTargets[t].name, len(kc.bad), kc.keys, kc.bad[0]))
		}
	}
	if len(sr.seq.diffs) > 0 {
		errs = append(errs, fmt.Errorf("the same script calls answered differently on rlserver and Redis (%d of %d), first: %s", len(sr.seq.diffs), sr.seq.calls, sr.seq.diffs[0]))
	}
	for s, ok := range sr.exists {
		if !ok {
			errs = append(errs, fmt.Errorf("%s: SCRIPT EXISTS does not find the script after the run", serverNames[s]))
		}
	}
	return errs
}

// printScripts writes -scripts' table (Markdown).
func (r *report) printScripts(w io.Writer) {
	cfg, sr := r.cfg, r.scripts
	r.printHead(w, "# kvcompare -scripts: the Lua token bucket by EVALSHA on rlserver and Redis, and RL.ALLOW on rlserver",
		"its defaults", "its defaults")
	if sr == nil {
		return
	}
	fmt.Fprintf(w, "script:   bench/kvcompare/token_bucket.lua (HMGET, HSET, PEXPIRE; the caller's clock), SHA1 %s, loaded by SCRIPT LOAD on each server\n", sr.sha)
	fmt.Fprintf(w, "calls:    EVALSHA <sha> 1 tb:<n> %d %s <now_ms> 1 and RL.ALLOW rl:<n> %d %s 1 (capacity %d, %s tokens/s, cost 1)\n",
		sr.capacity, strconv.FormatFloat(sr.rate, 'g', -1, 64), sr.capacity, strconv.FormatFloat(sr.rate, 'g', -1, 64), sr.capacity, strconv.FormatFloat(sr.rate, 'g', -1, 64))
	fmt.Fprintf(w, "load:     %d connections, random keys out of %s per target; per depth and target a %v warm-up, then %d runs of %v, rotating which goes first; load average %s -> %s\n",
		cfg.conns, benchproc.Commas(float64(cfg.keys)), cfg.warmup, cfg.rounds, cfg.duration, r.loadStart, r.loadEnd)
	if len(r.cases) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| -P (calls per round trip) | rlserver EVALSHA | Redis EVALSHA | rlserver RL.ALLOW | EVALSHA rlserver/Redis | RL.ALLOW / rlserver EVALSHA | RL.ALLOW / Redis EVALSHA | server CPU ns/call: rlserver EVALSHA / Redis EVALSHA / RL.ALLOW | generator CPU ns/call, same order | CPUs busy, server + generator, same order | denied, error replies, same order |")
		fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
		for _, c := range r.cases {
			var s [3]summary
			var denied, errs [3]int64
			var ops [3]int64
			for t := range s {
				s[t] = summarize(*c.of(t))
				errs[t] = c.warmErrs[t]
				for _, run := range *c.of(t) {
					denied[t] += run.denied
					errs[t] += run.errs
					ops[t] += run.all
				}
			}
			pct := func(t int) string {
				if ops[t] == 0 {
					return "-"
				}
				return fmt.Sprintf("%.1f%%", 100*float64(denied[t])/float64(ops[t]))
			}
			fmt.Fprintf(w, "| -P %d | %s ±%.0f%% | %s ±%.0f%% | %s ±%.0f%% | %s | %s | %s | %s / %s / %s | %s / %s / %s | %.2f + %.2f / %.2f + %.2f / %.2f + %.2f | %s, %d / %s, %d / %s, %d |\n",
				c.depth,
				benchproc.Commas(s[0].median), 100*s[0].spread, benchproc.Commas(s[1].median), 100*s[1].spread, benchproc.Commas(s[2].median), 100*s[2].spread,
				benchproc.Ratio(s[0].median, s[1].median), benchproc.Ratio(s[2].median, s[0].median), benchproc.Ratio(s[2].median, s[1].median),
				benchproc.Commas(s[0].srvNs), benchproc.Commas(s[1].srvNs), benchproc.Commas(s[2].srvNs),
				benchproc.Commas(s[0].genNs), benchproc.Commas(s[1].genNs), benchproc.Commas(s[2].genNs),
				s[0].srvCores, s[0].genCores, s[1].srvCores, s[1].genCores, s[2].srvCores, s[2].genCores,
				pct(0), errs[0], pct(1), errs[1], pct(2), errs[2])
		}
		fmt.Fprintln(w, "\nrates are medians of the runs in calls/s, ± half their range; server CPU is /proc's user + system time (Redis's with its finished BGSAVE children) over the measured windows; denied is the share of the measured runs' calls answered allowed=0")
	}
	fmt.Fprintln(w)
	for t, kc := range sr.keys {
		status := problems("all sane", "WRONG", kc.bad)
		avg := 0.0
		if kc.present > 0 {
			avg = kc.tokens / float64(kc.present)
		}
		fmt.Fprintf(w, "checked %-18s %s keys read back (%s called, %s present, %.1f tokens on average, within 0..%d): %s\n",
			scriptTargets[t].name+":", benchproc.Commas(float64(kc.keys)), benchproc.Commas(float64(kc.called)), benchproc.Commas(float64(kc.present)), avg, sr.capacity, status)
	}
	status := problems("identical", "DIFFER", sr.seq.diffs)
	fmt.Fprintf(w, "checked the same %d script calls on both servers (6 buckets, the clock and cost given, %d denied) and the hashes left: %s\n", sr.seq.calls, sr.seq.denied, status)
	fmt.Fprintf(w, "checked SCRIPT EXISTS after the run: rlserver %v, Redis %v\n", sr.exists[0], sr.exists[1])
}
