package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/bench/internal/clusterload"
	"github.com/rlserver/rlserver/slots"
)

const moveNodes = 4

func runMove(cfg config, dir string) error {
	logf("move: starting %d nodes", moveNodes)
	c, err := startCluster(cfg.bin, dir, moveNodes, moveNodes, cfg.quota, []string{"--commit-timeout", cfg.commitTimeout.String()})
	if err != nil {
		return err
	}
	track(c)
	defer c.stop()
	if _, err := c.waitPlaced(moveNodes, 120*time.Second); err != nil {
		return err
	}
	// The node to drain: a meta non-voter (its removal changes no meta
	// quorum); the group: one it holds and does not lead.
	ns, err := c.nodesInfo("")
	if err != nil {
		return err
	}
	var drain string
	for _, n := range ns {
		if slices.Contains(n.flags, "nonvoter") {
			drain = n.id
		}
	}
	if drain == "" {
		return fmt.Errorf("no meta non-voter among %+v", ns)
	}
	gs, err := c.groups(drain)
	if err != nil {
		return err
	}
	var g groupInfo
	for _, x := range gs {
		if slices.Contains(x.replicas, drain) && x.leader != drain {
			g = x
			break
		}
	}
	if g.id == 0 {
		return fmt.Errorf("no group held but not led by %s: %+v", drain, gs)
	}
	keys, err := keysInSlots("m:", g.slots, cfg.moveKeys)
	if err != nil {
		return err
	}
	cc := clusterload.NewClusterClient(c.addrs(), cfg.commitTimeout, 32)
	defer cc.Close()
	logf("move: filling group %d (slots %s, replicas %s) with %d keys", g.id, g.slots, strings.Join(g.replicas, ","), len(keys))
	rate, err := clusterload.Fill(cc, keys, 8, 512)
	if err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	filled := c.groupKeys(g.id)
	logf("move: filled at %.0f keys/s; group %d reports keys=%d", rate, g.id, filled)

	const before = 3 * time.Second
	l := clusterload.Singles(cc, keys, 4)
	time.Sleep(before)
	held := map[int]bool{}
	for _, x := range gs {
		if slices.Contains(x.replicas, drain) {
			held[x.id] = true
		}
	}
	logf("move: RL.CLUSTER REMOVE %s (replicas of %d groups)", drain, len(held))
	// RL.CLUSTER REMOVE answers once the node is drained: it runs aside
	// while the directory is polled.
	t0 := time.Now()
	removeErr := make(chan error, 1)
	go func() {
		_, err := c.do(drain, "RL.CLUSTER", "REMOVE", drain)
		removeErr <- err
	}()
	learnerAt := map[int]time.Duration{}
	doneAt := map[int]time.Duration{}
	var removed time.Duration
	deadline := t0.Add(10 * time.Minute)
	for time.Now().Before(deadline) && (len(doneAt) < len(held) || removed == 0) {
		time.Sleep(20 * time.Millisecond)
		el := time.Since(t0)
		if gs, err := c.groups(drain); err == nil {
			for _, x := range gs {
				if !held[x.id] || doneAt[x.id] > 0 {
					continue
				}
				if _, ok := learnerAt[x.id]; !ok && x.learner != "-" {
					learnerAt[x.id] = el
				}
				if x.learner == "-" && len(x.replicas) == 3 && !slices.Contains(x.replicas, drain) {
					doneAt[x.id] = el
				}
			}
		}
		if len(doneAt) == len(held) && removed == 0 {
			if ns, err := c.nodesInfo(drain); err == nil && !slices.ContainsFunc(ns, func(n nodeInfo) bool { return n.id == drain }) {
				removed = el
			}
		}
	}
	time.Sleep(time.Second)
	ss := l.Stop()
	select {
	case err := <-removeErr:
		if err != nil {
			return fmt.Errorf("RL.CLUSTER REMOVE %s: %w", drain, err)
		}
	case <-time.After(30 * time.Second):
		return fmt.Errorf("RL.CLUSTER REMOVE %s did not answer", drain)
	}
	if doneAt[g.id] == 0 {
		return fmt.Errorf("group %d's replica not moved off %s in 10 minutes; logs in %s", g.id, drain, dir)
	}
	bw := clusterload.Summarize(ss, t0.Add(-before), t0)
	dw := clusterload.Summarize(ss, t0, t0.Add(doneAt[g.id]))

	fmt.Printf("\n## Replica move: %d nodes, --groups %d --replicas 3; group %d filled with %d keys (keys=%d); RL.CLUSTER REMOVE %s under 4 goroutines of single RL.ALLOWs on that group's keys\n\n",
		moveNodes, moveNodes, g.id, len(keys), filled, drain)
	fmt.Println("| group | keys | learner seen | three replicas without the node |")
	fmt.Println("|---|---|---|---|")
	var ids []int
	for id := range held {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		k := "-"
		if id == g.id {
			k = strconv.Itoa(filled)
		}
		la := "-"
		if d, ok := learnerAt[id]; ok {
			la = fmt.Sprintf("%.2f s", d.Seconds())
		}
		fmt.Printf("| %d | %s | %s | %.2f s |\n", id, k, la, doneAt[id].Seconds())
	}
	rm := "not within 10 minutes"
	if removed > 0 {
		rm = fmt.Sprintf("%.2f s", removed.Seconds())
	}
	fmt.Printf("\n%s gone from RL.CLUSTER NODES after %s\n\n", drain, rm)
	fmt.Println("| requests on the group | requests | /s | p50 ms | p99 ms | max ms | errors |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, w := range []struct {
		name string
		w    clusterload.Window
	}{{fmt.Sprintf("%v before", before), bw}, {"during the move", dw}} {
		fmt.Printf("| %s | %d | %.0f | %s | %s | %s | %s |\n", w.name, w.w.Requests, w.w.PerSec, ms(w.w.P50), ms(w.w.P99), ms(w.w.Max), errText(w.w.Errs))
	}
	return nil
}

// keysInSlots returns n keys prefix<i> whose hash slot lies in one of
// the ranges of s ("0-99,200").
func keysInSlots(prefix, s string, n int) ([]string, error) {
	var ranges [][2]int
	for _, r := range strings.Split(s, ",") {
		a, b, ok := strings.Cut(r, "-")
		lo, err := strconv.Atoi(a)
		if err != nil {
			return nil, fmt.Errorf("bad slots %q", s)
		}
		hi := lo
		if ok {
			if hi, err = strconv.Atoi(b); err != nil {
				return nil, fmt.Errorf("bad slots %q", s)
			}
		}
		ranges = append(ranges, [2]int{lo, hi})
	}
	out := make([]string, 0, n)
	for i := 0; len(out) < n; i++ {
		k := prefix + strconv.Itoa(i)
		sl := slots.OfString(k)
		for _, r := range ranges {
			if sl >= r[0] && sl <= r[1] {
				out = append(out, k)
				break
			}
		}
	}
	return out, nil
}
