package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/rlserver/rlserver/bench/internal/benchproc"
	"github.com/rlserver/rlserver/bench/internal/clusterload"
)

// scaleRow is one measured configuration of part 1.
type scaleRow struct {
	nodes, run  int
	perSec      float64
	cpuUS       float64 // rlserver CPU per decision, summed over the processes, µs
	perNodeUS   []float64
	clientUS    float64 // this program's CPU per decision, µs
	use         float64 // the nodes' CPU over their quota over the window
	idle        float64 // the nodes' CPU without load, in cores summed
	throttled   float64 // share of the cgroups' periods that hit the quota
	leads       string
	errs        string
	loadAverage string
}

func runScale(cfg config, dir string) error {
	keys := make([]string, cfg.keys)
	for i := range keys {
		keys[i] = "k:" + strconv.Itoa(i)
	}
	var rows []scaleRow
	for run := 1; run <= cfg.runs; run++ {
		for _, n := range cfg.nodes {
			r, err := scaleOnce(cfg, filepath.Join(dir, fmt.Sprintf("r%d-n%d", run, n)), n, keys)
			if err != nil {
				return fmt.Errorf("%d nodes, run %d: %w", n, run, err)
			}
			r.run = run
			logf("%d nodes, run %d: %.0f decisions/s, %.2f µs CPU per decision (client %.2f), quota used %.0f%%, throttled %.0f%%, idle %.3f cores",
				n, run, r.perSec, r.cpuUS, r.clientUS, 100*r.use, 100*r.throttled, r.idle)
			rows = append(rows, r)
		}
	}
	printScale(cfg, rows)
	return nil
}

func scaleOnce(cfg config, dir string, n int, keys []string) (scaleRow, error) {
	row := scaleRow{nodes: n}
	logf("%d nodes: starting (--groups %d --replicas 3, quota %.2f)", n, n, cfg.quota)
	c, err := startCluster(cfg.bin, dir, n, n, cfg.quota, []string{"--commit-timeout", cfg.commitTimeout.String()})
	if err != nil {
		return row, err
	}
	track(c)
	defer c.stop()
	if row.leads, err = c.waitPlaced(n, 120*time.Second); err != nil {
		return row, err
	}
	if cfg.idle > 0 {
		i0, t := c.cpu(), time.Now()
		time.Sleep(cfg.idle)
		i1 := c.cpu()
		var sum time.Duration
		for i := range i0 {
			sum += i1[i] - i0[i]
		}
		row.idle = float64(sum) / float64(time.Since(t))
	}
	cc := clusterload.NewClusterClient(c.addrs(), cfg.commitTimeout, cfg.workers+8)
	defer cc.Close()
	warm := clusterload.Pipelines(cc, keys, cfg.workers, cfg.depth)
	time.Sleep(cfg.warmup)
	warm.Stop()

	c0, p0, t0 := c.cpu(), benchproc.CPUTime(os.Getpid()), time.Now()
	per0, thr0 := c.throttled()
	l := clusterload.Pipelines(cc, keys, cfg.workers, cfg.depth)
	time.Sleep(cfg.duration)
	ss := l.Stop()
	el := time.Since(t0)
	c1, p1 := c.cpu(), benchproc.CPUTime(os.Getpid())
	per1, thr1 := c.throttled()
	row.loadAverage = benchproc.LoadAvg()

	decisions := 0
	errs := map[string]int{}
	for _, s := range ss {
		decisions += s.N
		if s.Err != "" {
			errs[s.Err]++
		}
	}
	row.errs = errText(errs)
	if decisions == 0 {
		return row, fmt.Errorf("no decisions (errors %s); logs in %s", row.errs, dir)
	}
	row.perSec = float64(decisions) / el.Seconds()
	var sum time.Duration
	for i := range c0 {
		d := c1[i] - c0[i]
		sum += d
		row.perNodeUS = append(row.perNodeUS, float64(d)/1e3/float64(decisions))
	}
	row.cpuUS = float64(sum) / 1e3 / float64(decisions)
	row.clientUS = float64(p1-p0) / 1e3 / float64(decisions)
	if cfg.quota > 0 {
		row.use = float64(sum) / (cfg.quota * float64(n) * float64(el))
	}
	if per1 > per0 {
		row.throttled = float64(thr1-thr0) / float64(per1-per0)
	}
	return row, nil
}

func printScale(cfg config, rows []scaleRow) {
	base := map[int]float64{}
	baseCPU := map[int]float64{}
	count := map[int]int{}
	for _, r := range rows {
		base[r.nodes] += r.perSec
		baseCPU[r.nodes] += r.cpuUS
		count[r.nodes]++
	}
	b, bc := base[cfg.nodes[0]]/float64(count[cfg.nodes[0]]), baseCPU[cfg.nodes[0]]/float64(count[cfg.nodes[0]])
	fmt.Printf("\n## Scale-out: RL.ALLOW, %d goroutines × pipelines of %d, random keys over %d, go-redis ClusterClient, --groups N --replicas 3, %.2f core per node\n\n",
		cfg.workers, cfg.depth, cfg.keys, cfg.quota)
	fmt.Printf("Ratios are to the mean of the %d-node runs (%.0f/s, %.2f µs).\n\n", cfg.nodes[0], b, bc)
	fmt.Println("| nodes | run | decisions/s | ratio | CPU µs/decision (all nodes) | vs base | client µs/decision | quota used | throttled periods | idle cores (all nodes) | node:replicas/leads | errors | load avg |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %d | %d | %.0f | %s | %.2f | %+.0f%% | %.2f | %.0f%% | %.0f%% | %.3f | %s | %s | %s |\n",
			r.nodes, r.run, r.perSec, benchproc.Ratio(r.perSec, b), r.cpuUS, 100*(r.cpuUS/bc-1), r.clientUS,
			100*r.use, 100*r.throttled, r.idle, r.leads, r.errs, r.loadAverage)
	}
	fmt.Println()
	for _, n := range cfg.nodes {
		var ps, cs []float64
		for _, r := range rows {
			if r.nodes == n {
				ps, cs = append(ps, r.perSec), append(cs, r.cpuUS)
			}
		}
		fmt.Printf("%d nodes: %.0f-%.0f decisions/s (%.2f-%.2fx), %.2f-%.2f µs CPU per decision\n",
			n, slices.Min(ps), slices.Max(ps), slices.Min(ps)/b, slices.Max(ps)/b, slices.Min(cs), slices.Max(cs))
	}
	fmt.Println("\nCPU µs per decision by node (last run of each count):")
	for _, n := range cfg.nodes {
		for i := len(rows) - 1; i >= 0; i-- {
			if rows[i].nodes == n {
				fmt.Printf("  %d nodes:", n)
				for j, v := range rows[i].perNodeUS {
					fmt.Printf(" n%d %.2f", j+1, v)
				}
				fmt.Println()
				break
			}
		}
	}
}
