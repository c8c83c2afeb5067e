package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/rlserver/rlserver/bench/internal/clusterload"
)

const healNodes = 6

func runHeal(cfg config, dir string) error {
	keys := make([]string, 100000)
	for i := range keys {
		keys[i] = "h:" + strconv.Itoa(i)
	}
	fmt.Printf("\n## Heal: %d nodes, --groups %d --replicas 3 --node-dead-after %v, kill -9 of %s under %d goroutines × pipelines of %d\n\n",
		healNodes, healNodes, cfg.deadAfter, cfg.kill, max(1, cfg.workers/4), cfg.depth)
	fmt.Println("| run | groups on it | marked dead after | three live replicas after | minus dead-after | failed pipelines |")
	fmt.Println("|---|---|---|---|---|---|")
	for run := 1; run <= cfg.runs; run++ {
		if err := healOnce(cfg, filepath.Join(dir, fmt.Sprintf("r%d", run)), run, keys); err != nil {
			return fmt.Errorf("run %d: %w", run, err)
		}
	}
	return nil
}

func healOnce(cfg config, dir string, run int, keys []string) error {
	logf("heal, run %d: starting %d nodes", run, healNodes)
	c, err := startCluster(cfg.bin, dir, healNodes, healNodes, cfg.quota,
		[]string{"--commit-timeout", cfg.commitTimeout.String(), "--node-dead-after", cfg.deadAfter.String()})
	if err != nil {
		return err
	}
	track(c)
	defer c.stop()
	if _, err := c.waitPlaced(healNodes, 120*time.Second); err != nil {
		return err
	}
	victim := c.node(cfg.kill)
	if victim == nil {
		return fmt.Errorf("no node %s", cfg.kill)
	}
	gs, err := c.groups(victim.id)
	if err != nil {
		return err
	}
	on := 0
	for _, g := range gs {
		if slices.Contains(g.replicas, victim.id) {
			on++
		}
	}
	cc := clusterload.NewClusterClient(c.addrs(), cfg.commitTimeout, cfg.workers+8)
	defer cc.Close()
	l := clusterload.Pipelines(cc, keys, max(1, cfg.workers/4), cfg.depth)
	time.Sleep(2 * time.Second)

	logf("heal, run %d: kill -9 %s (replicas of %d groups)", run, victim.id, on)
	t0 := time.Now()
	victim.kill()
	var dead, healed time.Duration
	deadline := t0.Add(cfg.deadAfter + 5*time.Minute)
	for time.Now().Before(deadline) && healed == 0 {
		time.Sleep(20 * time.Millisecond)
		if dead == 0 {
			if ns, err := c.nodesInfo(victim.id); err == nil {
				for _, n := range ns {
					if n.id == victim.id && slices.Contains(n.flags, "dead") {
						dead = time.Since(t0)
					}
				}
			}
		}
		if gs, err := c.groups(victim.id); err == nil && placed(gs, healNodes, victim.id) {
			healed = time.Since(t0)
		}
	}
	ss := l.Stop()
	failed := map[string]int{}
	for _, s := range ss {
		if s.Err != "" && !s.Start.Before(t0) {
			failed[s.Err]++
		}
	}
	if healed == 0 {
		return fmt.Errorf("groups not back to three live replicas in %v; logs in %s", deadline.Sub(t0), dir)
	}
	deadText := "-"
	if dead > 0 {
		deadText = fmt.Sprintf("%.2f s", dead.Seconds())
	}
	fmt.Printf("| %d | %d | %s | %.2f s | %.2f s | %s |\n", run, on, deadText, healed.Seconds(), (healed - cfg.deadAfter).Seconds(), errText(failed))
	return nil
}
