package main

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/bench/internal/benchproc"
)

// caseResult is one pattern at one depth: the measured runs on each
// server (rlserver, Redis).
type caseResult struct {
	pat   pattern
	depth int
	runs  [2][]loadResult
	// -scripts: runs[0] and runs[1] are EVALSHA on rlserver and Redis,
	// allow RL.ALLOW on rlserver (see scriptTargets); error replies in
	// each target's warm-up, the first one's text
	allow     []loadResult
	warmErrs  [3]int64
	warmFirst [3]string
}

// of is the runs of scriptTargets[t].
func (c *caseResult) of(t int) *[]loadResult {
	if t == 2 {
		return &c.allow
	}
	return &c.runs[t]
}

// report is everything a run measured.
type report struct {
	cfg                config
	machine            []string
	loadStart, loadEnd string
	cases              []caseResult
	verified           []verified
	mem                [2]*memResult
	scripts            *scriptResult // -scripts
}

// summary is a case's runs on one server: the median rate, its spread
// (half the range, relative), and CPU time per operation and CPUs used
// over all runs.
type summary struct {
	median, spread     float64
	srvNs, genNs       float64
	srvCores, genCores float64
	readsPerTrip       float64
}

func summarize(runs []loadResult) summary {
	var s summary
	if len(runs) == 0 {
		return s
	}
	rates := make([]float64, len(runs))
	var ops int64
	var elapsed, srv, gen time.Duration
	var trips, reads int64
	for i, r := range runs {
		trips += r.trips
		reads += r.reads
		rates[i] = r.rate()
		ops += r.ops
		elapsed += r.elapsed
		srv += r.srvCPU
		gen += r.genCPU
	}
	slices.Sort(rates)
	n := len(rates)
	s.median = rates[n/2]
	if n%2 == 0 {
		s.median = (rates[n/2-1] + rates[n/2]) / 2
	}
	if s.median > 0 {
		s.spread = (rates[n-1] - rates[0]) / 2 / s.median
	}
	s.srvNs, s.genNs = perOp(srv, ops), perOp(gen, ops)
	s.srvCores, s.genCores = srv.Seconds()/elapsed.Seconds(), gen.Seconds()/elapsed.Seconds()
	if trips > 0 {
		s.readsPerTrip = float64(reads) / float64(trips)
	}
	return s
}

// failed is an error when a server's values were not what the generator
// wrote, or a memory load left a key count other than the keys loaded.
func (r *report) failed() error {
	var errs []error
	for _, v := range r.verified {
		if len(v.mismatch) > 0 {
			errs = append(errs, fmt.Errorf("%s, %s: %d of %d keys read back differ from what the generator wrote", v.server, v.pat.name, len(v.mismatch), v.keys))
		}
	}
	errs = append(errs, r.scriptsFailed()...)
	for s, m := range r.mem {
		if m != nil && m.dbsize != int64(m.keys) {
			errs = append(errs, fmt.Errorf("%s: DBSIZE %d after loading %d counters", serverNames[s], m.dbsize, m.keys))
		}
	}
	return errors.Join(errs...)
}

// printHead writes a report's title, the machine it ran on and each
// server's settings: the flags given, else rlDefault and redisDefault.
func (r *report) printHead(w io.Writer, title, rlDefault, redisDefault string) {
	fmt.Fprintln(w, title)
	for _, l := range r.machine {
		fmt.Fprintln(w, l)
	}
	rlSet, redisSet := rlDefault, redisDefault
	if r.cfg.rlArgs != "" {
		rlSet = r.cfg.rlArgs
	}
	if r.cfg.redisArgs != "" {
		redisSet = r.cfg.redisArgs
	}
	fmt.Fprintf(w, "settings: rlserver %s; Redis %s; data in temporary folders; pinned: %v\n", rlSet, redisSet, r.cfg.pin)
}

// problems is ok when there are none, else how many there are (named
// what) and the first three.
func problems(ok, what string, found []string) string {
	if len(found) == 0 {
		return ok
	}
	return fmt.Sprintf("%d %s, first: %s", len(found), what, strings.Join(found[:min(3, len(found))], "; "))
}

// print writes the table (Markdown, so it pastes into docs).
func (r *report) print(w io.Writer) {
	cfg := r.cfg
	if cfg.scripts {
		r.printScripts(w)
		return
	}
	r.printHead(w, "# kvcompare: rlserver's data commands against Redis, side by side",
		"its defaults, snapshots every second while keys change", "its defaults, its built-in save rules")
	fmt.Fprintf(w, "load:     %d connections, random keys out of %s per pattern, EXPIRE %d s; per case and server a %v warm-up, then %d runs of %v, alternating; load average %s -> %s\n",
		cfg.conns, benchproc.Commas(float64(cfg.keys)), cfg.ttl, cfg.warmup, cfg.rounds, cfg.duration, r.loadStart, r.loadEnd)
	if len(r.cases) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| case (-P: operations per round trip) | rlserver | Redis | rlserver/Redis | server CPU ns/op, rlserver / Redis | generator CPU ns/op, rlserver / Redis | CPUs busy, server + generator: rlserver / Redis | generator reads per round trip, rlserver / Redis |")
		fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|")
		for _, c := range r.cases {
			rl, rd := summarize(c.runs[0]), summarize(c.runs[1])
			fmt.Fprintf(w, "| %s, %s, -P %d | %s ±%.0f%% | %s ±%.0f%% | %s | %s / %s | %s / %s | %.2f + %.2f / %.2f + %.2f | %.2f / %.2f |\n",
				c.pat.name, c.pat.unit, c.depth,
				benchproc.Commas(rl.median), 100*rl.spread, benchproc.Commas(rd.median), 100*rd.spread, benchproc.Ratio(rl.median, rd.median),
				benchproc.Commas(rl.srvNs), benchproc.Commas(rd.srvNs), benchproc.Commas(rl.genNs), benchproc.Commas(rd.genNs),
				rl.srvCores, rl.genCores, rd.srvCores, rd.genCores, rl.readsPerTrip, rd.readsPerTrip)
		}
		fmt.Fprintln(w, "\nrates are medians of the runs, ± half their range; an operation is a pair (INCRBY + EXPIRE) or a transaction (MULTI, INCR, EXPIRE, EXEC); server CPU is /proc's user + system time (Redis's with its finished BGSAVE children); the generator reads more per round trip from a server that writes a round trip's replies in several pieces")
	}
	for _, v := range r.verified {
		status := problems("all match", "DIFFER", v.mismatch)
		fmt.Fprintf(w, "checked %-8s %-22s %s keys read back (%s written by the generator, counters summing to %s, TTL in 1..%d): %s\n",
			v.server+":", v.pat.name+":", benchproc.Commas(float64(v.keys)), benchproc.Commas(float64(v.written)), benchproc.Commas(float64(v.total)), cfg.ttl, status)
	}
	rl, rd := r.mem[0], r.mem[1]
	if rl == nil || rd == nil {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| %s counters with a TTL (INCR + EXPIRE 3600, counter:<n>) | rlserver | Redis | rlserver/Redis |\n", benchproc.Commas(float64(rl.keys)))
	fmt.Fprintln(w, "|---|--:|--:|--:|")
	row := func(name string, a, b float64, f func(float64) string) {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", name, f(a), f(b), benchproc.Ratio(a, b))
	}
	oneDec := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	row("RSS growth, bytes/key", rl.perKey(rl.rssBase, rl.rssAfter), rd.perKey(rd.rssBase, rd.rssAfter), oneDec)
	row("peak RSS growth while loading (VmHWM), bytes/key", rl.perKey(rl.rssBase, rl.peak), rd.perKey(rd.rssBase, rd.peak), oneDec)
	row("INFO used_memory growth, bytes/key", rl.perKey(rl.info0["used_memory"], rl.info1["used_memory"]),
		rd.perKey(rd.info0["used_memory"], rd.info1["used_memory"]), oneDec)
	row("loading rate, counters/s (8 connections, 256 per round trip)", rl.loadRate, rd.loadRate, benchproc.Commas)
	fmt.Fprintf(w, "\nRSS: rlserver %.1f -> %.1f MiB, Redis %.1f -> %.1f MiB (read %.1f s and %.1f s after loading); DBSIZE after: rlserver %d, Redis %d\n",
		benchproc.MiB(rl.rssBase), benchproc.MiB(rl.rssAfter), benchproc.MiB(rd.rssBase), benchproc.MiB(rd.rssAfter), rl.settle.Seconds(), rd.settle.Seconds(), rl.dbsize, rd.dbsize)
	fmt.Fprintf(w, "rlserver INFO memory, growth per key: %s\n", infoGrowth(rl, nil))
	fmt.Fprintf(w, "Redis INFO memory, growth per key:    %s\n", infoGrowth(rd, []string{"used_memory", "used_memory_rss", "used_memory_dataset", "used_memory_overhead"}))
}

// infoGrowth lists INFO memory fields' growth per key: the fields given,
// or every field that changed except the machine's and the limit's.
func infoGrowth(m *memResult, fields []string) string {
	if fields == nil {
		for k, v := range m.info1 {
			if v != m.info0[k] && !strings.HasPrefix(k, "total_system") && !strings.HasPrefix(k, "maxmemory") {
				fields = append(fields, k)
			}
		}
		slices.Sort(fields)
	}
	var parts []string
	for _, k := range fields {
		parts = append(parts, fmt.Sprintf("%s %.1f (%s -> %s)", k, m.perKey(m.info0[k], m.info1[k]), benchproc.Commas(float64(m.info0[k])), benchproc.Commas(float64(m.info1[k]))))
	}
	return strings.Join(parts, ", ")
}

// describeMachine names the machine and the software measured.
func describeMachine(cfg config) []string {
	return []string{
		"date:     " + time.Now().Format("2006-01-02 15:04:05 MST"),
		fmt.Sprintf("machine:  %d CPUs, %s, Linux %s", runtime.NumCPU(), benchproc.CPUModel(), benchproc.Kernel()),
		"servers:  " + benchproc.Version(cfg.rlserver, "--version") + "; " + benchproc.Version(cfg.redisServer, "--version"),
		"client:   kvcompare's RESP generator, " + runtime.Version(),
	}
}
