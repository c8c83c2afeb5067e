package main

import (
	"fmt"
	"github.com/rlserver/rlserver/bench/internal/clusterload"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The redis-benchmark case of every round (-c from -bench-clients), as
// bench/sharded-compare.sh runs it: redis-benchmark --cluster replaces {tag} with a tag of one
// slot of each master and spreads its clients over the masters.
const (
	benchPipeline = 32
	benchKeys     = 100000
)

type roundRow struct {
	stage, loader string
	perSec        float64
	cpuTotal      float64   // µs of CPU per decision, the three processes together
	cpuEach       []float64 // per process
	errs          string    // failed replies by kind (the Go load only)
}

type idleRow struct {
	stage string
	each  []float64 // % of a core per process
}

func runRebalance(cfg config, d *deployment, quota float64) error {
	cc := clusterload.NewClusterClient(d.addrs, cfg.commitTimeout, 32)
	defer cc.Close()
	rng := rand.New(rand.NewPCG(7, 7))
	keys := make([]string, cfg.rebKeys)
	for i := range keys {
		keys[i] = "rb:" + strconv.FormatUint(rng.Uint64(), 36)
	}
	rate, err := clusterload.Fill(cc, keys, 8, 512)
	if err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	label := "no CPU limit"
	if quota > 0 {
		label = fmt.Sprintf("each process limited to %.2f core", quota)
	}
	logf("%s: filled %d random keys at %.0f keys/s", label, len(keys), rate)

	var rounds []roundRow
	var idles []idleRow
	measure := func(stage string) error {
		idles = append(idles, idleRow{stage, idleCPU(d, cfg.idle)})
		for range cfg.rounds {
			row, err := benchRound(cfg, d)
			if err != nil {
				return err
			}
			row.stage = stage
			rounds = append(rounds, row)
			logf("%s, %s: %.0f/s, %.2f µs CPU per decision", stage, row.loader, row.perSec, row.cpuTotal)
			if cfg.goLoad > 0 {
				row = goRound(cfg, d, cc, keys)
				row.stage = stage
				rounds = append(rounds, row)
				logf("%s, %s: %.0f/s, %.2f µs CPU per decision, failed pipelines %s", stage, row.loader, row.perSec, row.cpuTotal, row.errs)
			}
		}
		return nil
	}

	if err := measure("2 groups"); err != nil {
		return err
	}

	t := time.Now()
	g, err := d.do(0, "RL.CLUSTER", "ADDGROUP")
	if err != nil {
		return fmt.Errorf("RL.CLUSTER ADDGROUP: %w", err)
	}
	addTook := time.Since(t)
	if err := d.waitLeaders(3, time.Now().Add(60*time.Second)); err != nil {
		return err
	}
	addSpread := time.Since(t)
	logf("ADDGROUP: group %v in %s, led by n3 after %s", g, addTook.Round(time.Millisecond), addSpread.Round(time.Millisecond))
	if err := measure("3 groups, group 3 empty"); err != nil {
		return err
	}

	lastID := lastMoveID(d)
	t = time.Now()
	if _, err := d.do(0, "RL.CLUSTER", "REBALANCE"); err != nil {
		return fmt.Errorf("RL.CLUSTER REBALANCE: %w", err)
	}
	var gs []groupInfo
	for {
		if time.Since(t) > 10*time.Minute {
			return fmt.Errorf("rebalance not done after 10 minutes: %+v", gs)
		}
		time.Sleep(20 * time.Millisecond)
		gs, err = d.groups()
		if err != nil || len(gs) != 3 || movesInProgress(d) {
			continue
		}
		lo, hi := gs[0].slots, gs[0].slots
		for _, g := range gs {
			lo, hi = min(lo, g.slots), max(hi, g.slots)
		}
		if hi-lo <= 1 {
			break
		}
	}
	rebTook := time.Since(t)
	moves, slotsMoved, keysMoved := movesSince(d, lastID)
	if err := d.waitLeaders(3, time.Now().Add(60*time.Second)); err != nil {
		return err
	}
	logf("REBALANCE: %d moves, %d slots, %d keys in %s", moves, slotsMoved, keysMoved, rebTook.Round(time.Millisecond))
	if err := measure("3 groups balanced"); err != nil {
		return err
	}

	fmt.Printf("\n## Rebalance, %s (3 processes, fsync on; %d random keys filled first)\n\n", label, len(keys))
	fmt.Printf("RL.CLUSTER ADDGROUP answered in %s; n3 led the new group %s after it. RL.CLUSTER REBALANCE: %d moves, %d slots, %d keys, balanced %s after it was sent; slots now",
		ms(addTook)+" ms", ms(addSpread)+" ms", moves, slotsMoved, keysMoved, ms(rebTook)+" ms")
	for _, g := range gs {
		fmt.Printf(" g%d=%d (%d keys)", g.id, g.slots, g.keys)
	}
	fmt.Printf(".\n\n| stage | load | decisions/s | CPU µs/decision, 3 processes | n1 / n2 / n3 µs/decision | failed pipelines |\n| --- | --- | ---: | ---: | --- | --- |\n")
	for _, r := range rounds {
		fmt.Printf("| %s | %s | %.0f | %.2f | %s | %s |\n", r.stage, r.loader, r.perSec, r.cpuTotal, joinF(r.cpuEach, 2), r.errs)
	}
	fmt.Printf("\n| idle, %s | %% of a core, 3 processes | n1 / n2 / n3 |\n| --- | ---: | --- |\n", label)
	for _, r := range idles {
		sum := 0.0
		for _, v := range r.each {
			sum += v
		}
		fmt.Printf("| %s | %.1f | %s |\n", r.stage, sum, joinF(r.each, 1))
	}
	return nil
}

func joinF(v []float64, prec int) string {
	var s []string
	for _, x := range v {
		s = append(s, strconv.FormatFloat(x, 'f', prec, 64))
	}
	return strings.Join(s, " / ")
}

// idleCPU returns each process's CPU over span with no load, in % of a
// core.
func idleCPU(d *deployment, span time.Duration) []float64 {
	time.Sleep(time.Second) // let the last load's work drain
	c0, t0 := d.cpuSample(), time.Now()
	time.Sleep(span)
	c1, el := d.cpuSample(), time.Since(t0).Seconds()
	var out []float64
	for i := range c0 {
		out = append(out, float64(c1[i]-c0[i])/clockTick/el*100)
	}
	return out
}

func cpuPerDecision(c0, c1 []int64, decisions float64) (float64, []float64) {
	total := 0.0
	var each []float64
	for i := range c0 {
		us := float64(c1[i]-c0[i]) / clockTick * 1e6 / decisions
		each = append(each, us)
		total += us
	}
	return total, each
}

// benchRound runs redis-benchmark --cluster once.
func benchRound(cfg config, d *deployment) (roundRow, error) {
	_, port, _ := strings.Cut(d.addrs[0], ":")
	c0 := d.cpuSample()
	out, err := exec.Command("redis-benchmark", "--cluster", "-h", "127.0.0.1", "-p", port,
		"-c", strconv.Itoa(cfg.benchClients), "-P", strconv.Itoa(benchPipeline), "-n", strconv.Itoa(cfg.requests),
		"-r", strconv.Itoa(benchKeys), "--csv", "RL.ALLOW", "key:{tag}:__rand_int__", clusterload.LimitCapacity, clusterload.LimitRate, "1").Output()
	c1 := d.cpuSample()
	if err != nil {
		return roundRow{}, fmt.Errorf("redis-benchmark: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	f := strings.Split(lines[len(lines)-1], ",")
	if len(f) < 2 {
		return roundRow{}, fmt.Errorf("redis-benchmark: unexpected output %q", out)
	}
	rps, err := strconv.ParseFloat(strings.Trim(f[1], `"`), 64)
	if err != nil {
		return roundRow{}, fmt.Errorf("redis-benchmark: unexpected output %q", out)
	}
	total, each := cpuPerDecision(c0, c1, float64(cfg.requests))
	return roundRow{loader: fmt.Sprintf("redis-benchmark -c %d -P %d", cfg.benchClients, benchPipeline),
		perSec: rps, cpuTotal: total, cpuEach: each, errs: "-"}, nil
}

// goRound runs the go-redis ClusterClient load (random keys over every
// slot) for cfg.goLoad.
func goRound(cfg config, d *deployment, cc *redis.ClusterClient, keys []string) roundRow {
	workers, depth := cfg.goWorkers, benchPipeline
	c0 := d.cpuSample()
	t0 := time.Now()
	l := clusterload.Pipelines(cc, keys, workers, depth)
	time.Sleep(cfg.goLoad)
	ss := l.Stop()
	el := time.Since(t0).Seconds()
	c1 := d.cpuSample()
	n := 0
	errs := map[string]int{}
	for _, s := range ss {
		n += s.N
		if s.Err != "" {
			errs[s.Err]++
		}
	}
	total, each := cpuPerDecision(c0, c1, float64(max(n, 1)))
	return roundRow{loader: fmt.Sprintf("go-redis, %d×P%d random keys", workers, depth),
		perSec: float64(n) / el, cpuTotal: total, cpuEach: each, errs: errText(errs)}
}

// movesInProgress reports whether RL.CLUSTER MOVES lists a move not yet
// released.
func movesInProgress(d *deployment) bool {
	v, err := d.do(0, "RL.CLUSTER", "MOVES")
	if err != nil {
		return true
	}
	s, _ := v.(string)
	return strings.Contains(s, "state=begun") || strings.Contains(s, "state=committed")
}

func lastMoveID(d *deployment) int64 {
	v, _ := d.do(0, "RL.CLUSTER", "MOVES")
	s, _ := v.(string)
	last := int64(0)
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 {
			if id, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				last = max(last, id)
			}
		}
	}
	return last
}

// movesSince sums the moves after id: count, slots, keys.
func movesSince(d *deployment, id int64) (moves, slotCount, keys int) {
	v, _ := d.do(0, "RL.CLUSTER", "MOVES")
	s, _ := v.(string)
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if n, err := strconv.ParseInt(f[0], 10, 64); err != nil || n <= id {
			continue
		}
		moves++
		for _, kv := range f[1:] {
			if v, ok := strings.CutPrefix(kv, "slots="); ok {
				slotCount += clusterload.CountSlots(v)
			}
			if v, ok := strings.CutPrefix(kv, "keys="); ok {
				k, _ := strconv.Atoi(v)
				keys += k
			}
		}
	}
	return moves, slotCount, keys
}
