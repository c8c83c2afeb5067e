package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/bench/internal/benchproc"
	"github.com/rlserver/rlserver/bench/internal/clusterload"
)

// deployment is three rlserver processes on loopback sharing one --peers
// list, each with a data folder under dir.
type deployment struct {
	dir     string
	addrs   []string // client addresses, n1..n3
	cmds    []*exec.Cmd
	cgroups []*benchproc.CPUQuota
	admin   []*redis.Client // one plain connection pool per process
}

// startDeployment starts three processes with --groups groups. quota > 0
// puts each process in a cgroup of its own limited to that share of one
// core (the load generator stays outside). extra flags go to every
// process.
func startDeployment(bin, dir string, groups int, quota float64, extra []string) (*deployment, error) {
	ports, err := benchproc.FreePorts(6)
	if err != nil {
		return nil, err
	}
	d := &deployment{dir: dir}
	var peers []string
	for i := range 3 {
		peers = append(peers, fmt.Sprintf("n%d=127.0.0.1:%d", i+1, ports[3+i]))
	}
	for i := range 3 {
		addr := fmt.Sprintf("127.0.0.1:%d", ports[i])
		ndir := filepath.Join(dir, fmt.Sprintf("n%d", i+1))
		if err := os.MkdirAll(ndir, 0o755); err != nil {
			d.stop()
			return nil, err
		}
		args := append([]string{"--node-id", fmt.Sprintf("n%d", i+1), "--addr", addr,
			"--raft-addr", fmt.Sprintf("127.0.0.1:%d", ports[3+i]), "--peers", strings.Join(peers, ","),
			"--groups", strconv.Itoa(groups), "--dir", ndir, "--log-level", "info"}, extra...)
		var cmd *exec.Cmd
		if quota > 0 {
			q, err := benchproc.NewCPUQuota(fmt.Sprintf("rl-moves-%d-%d", os.Getpid(), i+1), quota)
			if err != nil {
				d.stop()
				return nil, err
			}
			d.cgroups = append(d.cgroups, q)
			cmd = q.Command(bin, args...)
		} else {
			cmd = exec.Command(bin, args...)
		}
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("n%d.log", i+1)))
		if err != nil {
			d.stop()
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			logf.Close()
			d.stop()
			return nil, err
		}
		logf.Close()
		d.cmds = append(d.cmds, cmd)
		d.addrs = append(d.addrs, addr)
		d.admin = append(d.admin, redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 30 * time.Second, PoolSize: 2}))
	}
	if err := d.waitReady(groups); err != nil {
		d.stop()
		return nil, err
	}
	return d, nil
}

// stop kills the processes this deployment started, waits for them and
// removes their cgroups.
func (d *deployment) stop() {
	for _, c := range d.admin {
		c.Close()
	}
	for _, c := range d.cmds {
		c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range d.cmds {
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			c.Process.Kill()
			<-done
		}
	}
	for _, q := range d.cgroups {
		q.Remove()
	}
	d.cmds, d.cgroups, d.admin = nil, nil, nil
}

func (d *deployment) pids() []int {
	var p []int
	for _, c := range d.cmds {
		p = append(p, c.Process.Pid)
	}
	return p
}

// do sends one command to process i.
func (d *deployment) do(i int, args ...any) (any, error) {
	return d.admin[i].Do(context.Background(), args...).Result()
}

// groupInfo is one line of RL.CLUSTER GROUPS.
type groupInfo struct {
	id     int
	leader string
	slots  int // slots owned
	keys   int
}

func (d *deployment) groups() ([]groupInfo, error) {
	v, err := d.do(0, "RL.CLUSTER", "GROUPS")
	if err != nil {
		return nil, err
	}
	s, _ := v.(string)
	var out []groupInfo
	for _, g := range clusterload.ParseGroups(s) {
		out = append(out, groupInfo{id: g.ID, leader: g.Leader, slots: clusterload.CountSlots(g.Slots), keys: g.Keys})
	}
	return out, nil
}

// waitReady waits until every slot is served and each group g is led by
// its preferred process, n((g-1) mod 3 + 1), as the deployment settles
// within a few seconds (docs/cluster-mode.md, "Leaders spread").
func (d *deployment) waitReady(groups int) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		v, err := d.do(0, "CLUSTER", "INFO")
		if s, _ := v.(string); err == nil && strings.Contains(s, "cluster_state:ok") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return d.waitLeaders(groups, deadline)
}

func (d *deployment) waitLeaders(groups int, deadline time.Time) error {
	var last []groupInfo
	for time.Now().Before(deadline) {
		gs, err := d.groups()
		if err == nil && len(gs) == groups {
			ok := true
			for _, g := range gs {
				if g.leader != fmt.Sprintf("n%d", (g.id-1)%3+1) {
					ok = false
				}
			}
			if ok {
				return nil
			}
		}
		last = gs
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("leaders not spread in time (last: %+v); logs in %s", last, d.dir)
}

// clockTick is USER_HZ; 100 on every Linux architecture Go supports.
const clockTick = 100

// cpuSample reads every process's CPU ticks.
func (d *deployment) cpuSample() []int64 {
	var out []int64
	for _, p := range d.pids() {
		out = append(out, int64(benchproc.CPUTime(p)*clockTick/time.Second))
	}
	return out
}

var errMoveFailed = errors.New("move did not finish")
