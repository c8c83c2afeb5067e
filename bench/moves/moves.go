package main

import (
	"fmt"
	"github.com/rlserver/rlserver/bench/internal/clusterload"
	"strconv"
	"strings"
	"time"
)

// moveResult is one move as the directory and the loads saw it.
type moveResult struct {
	committed, released time.Duration // from RL.CLUSTER MOVE, polled every 10 ms
	took                string        // the directory's begin-to-release time
	keys                string        // records the target imported
}

// waitMove polls RL.CLUSTER MOVES until move id is released.
func waitMove(d *deployment, id int64, t0 time.Time, limit time.Duration) (moveResult, error) {
	var r moveResult
	prefix := strconv.FormatInt(id, 10) + " "
	for time.Since(t0) < limit {
		v, err := d.do(0, "RL.CLUSTER", "MOVES")
		if err == nil {
			s, _ := v.(string)
			for _, line := range strings.Split(s, "\n") {
				if !strings.HasPrefix(line, prefix) {
					continue
				}
				now := time.Since(t0)
				if strings.Contains(line, "state=committed") && r.committed == 0 {
					r.committed = now
				}
				if strings.Contains(line, "state=released") {
					if r.committed == 0 {
						r.committed = now
					}
					r.released = now
					for _, f := range strings.Fields(line) {
						if v, ok := strings.CutPrefix(f, "took="); ok {
							r.took = v
						}
						if v, ok := strings.CutPrefix(f, "keys="); ok {
							r.keys = v
						}
					}
					return r, nil
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return r, fmt.Errorf("%w: move %d after %s", errMoveFailed, id, limit)
}

func runMoves(cfg config, d *deployment) error {
	inCC := clusterload.NewClusterClient(d.addrs, cfg.commitTimeout, 32)
	defer inCC.Close()
	outCC := clusterload.NewClusterClient(d.addrs, cfg.commitTimeout, 32)
	defer outCC.Close()

	var ranges [][2]int
	var rangeKeys [][]string
	for i, n := range cfg.sizes {
		lo, hi := i*cfg.width, (i+1)*cfg.width-1
		keys := clusterload.KeysInRange(fmt.Sprintf("mv%d:", i), lo, hi, n)
		rate, err := clusterload.Fill(inCC, keys, 8, 512)
		if err != nil {
			return fmt.Errorf("fill: %w", err)
		}
		logf("filled %d keys in slots %d-%d at %.0f keys/s", n, lo, hi, rate)
		ranges = append(ranges, [2]int{lo, hi})
		rangeKeys = append(rangeKeys, keys)
	}
	outside := clusterload.KeysOutside("out:", ranges, 200000)
	if _, err := clusterload.Fill(outCC, outside, 8, 512); err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	if gs, err := d.groups(); err == nil {
		for _, g := range gs {
			logf("group %d: leader %s, %d slots, %d keys", g.id, g.leader, g.slots, g.keys)
		}
	}

	fmt.Printf("\n## Moves (3 processes, 2 groups, fsync on, --commit-timeout %s; in-range: %d goroutines, one RL.ALLOW at a time; outside: %d goroutines, pipelines of %d)\n\n",
		cfg.commitTimeout, cfg.inWorkers, cfg.outWorkers, cfg.depth)
	fmt.Println("| keys | slots | from→to | committed | released | took= | keys= | in-range before p50/p99/max ms | in-range during: requests, p50/p99/max ms, ≥100 ms, errors | outside before/s | outside during/s | during/before | outside p99 before/during ms, failed pipelines during |")
	fmt.Println("| ---: | --- | --- | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | --- |")
	for i, n := range cfg.sizes {
		lo, hi := ranges[i][0], ranges[i][1]
		for r := range cfg.runs {
			from, to := 1, 2
			if r%2 == 1 {
				from, to = 2, 1
			}
			in := clusterload.Singles(inCC, rangeKeys[i], cfg.inWorkers)
			out := clusterload.Pipelines(outCC, outside, cfg.outWorkers, cfg.depth)
			time.Sleep(cfg.before)
			t0 := time.Now()
			v, err := d.do(0, "RL.CLUSTER", "MOVE", lo, hi, to)
			if err != nil {
				in.Stop()
				out.Stop()
				return fmt.Errorf("RL.CLUSTER MOVE %d %d %d: %w", lo, hi, to, err)
			}
			id, _ := v.(int64)
			res, err := waitMove(d, id, t0, 10*time.Minute)
			if err != nil {
				in.Stop()
				out.Stop()
				return err
			}
			tr := t0.Add(res.released)
			time.Sleep(cfg.after)
			inS, outS := in.Stop(), out.Stop()

			// The first half second of a load warms its connections.
			b0 := t0.Add(-cfg.before + 500*time.Millisecond)
			inB, inD := clusterload.Summarize(inS, b0, t0), clusterload.Summarize(inS, t0, tr)
			outB, outD := clusterload.Summarize(outS, b0, t0), clusterload.Summarize(outS, t0, tr)
			slow := 0
			for _, s := range inS {
				if !s.Start.Before(t0) && s.Start.Before(tr) && s.Lat >= 100*time.Millisecond {
					slow++
				}
			}
			ratio := 0.0
			if outB.PerSec > 0 {
				ratio = outD.PerSec / outB.PerSec
			}
			fmt.Printf("| %d | %d-%d | %d→%d | %s ms | %s ms | %s | %s | %s / %s / %s | %d, %s / %s / %s, %d, %s | %.0f | %.0f | %.2f | %s / %s, %s |\n",
				n, lo, hi, from, to, ms(res.committed), ms(res.released), res.took, res.keys,
				ms(inB.P50), ms(inB.P99), ms(inB.Max),
				inD.Requests, ms(inD.P50), ms(inD.P99), ms(inD.Max), slow, errText(inD.Errs),
				outB.PerSec, outD.PerSec, ratio, ms(outB.P99), ms(outD.P99), errText(outD.Errs))
			// Let the source's and the target's logs settle before the
			// next baseline.
			time.Sleep(time.Second)
		}
	}
	return nil
}
