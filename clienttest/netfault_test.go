package clienttest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
)

// Network faults: the three nodes run in network namespaces of their own
// (netns_test.go) and nftables rules inside the namespaces cut links or
// drop packets while clients load every node. For each fault the test
// records the RL.ALLOW history and checks it with porcupine, counts the
// acknowledged decisions the final state lacks, compares the replicas'
// digests after healing, and measures the longest time with no node
// serving and the time until the faulted nodes serve again. tc netem is
// not used (kernels without sch_netem exist, this test machine's among
// them), so there is packet loss but no added delay.
//
// The short version (one run of each fault) runs in CI; RLSERVER_FAULTS=1
// (make faults) runs several rounds of each with longer faults.

// probeCap is the capacity of the probes' buckets; the prober moves to a
// fresh key every probeCap/2 decisions, so its buckets never run dry.
const probeCap = histCapacity

// netFault is one fault: apply installs it (the leader's lab index given)
// and returns the nodes it cuts off, whose return to service is timed.
type netFault struct {
	id     string // the subtest's name
	name   string
	single bool // a fault of one node: the 2 s service goal applies
	apply  func(ft *faultTest, leader int) []int
}

type faultTest struct {
	t   *testing.T
	lab *netLab
	c   *pcluster
	rng *rand.Rand

	mu    sync.Mutex
	acked map[string]int64 // probe key -> units acknowledged as allowed
}

// faultLong reports whether the long version runs.
func faultLong() bool { return os.Getenv("RLSERVER_FAULTS") != "" }

// faultSeed is RLSERVER_FAULT_SEED, or the clock.
func faultSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("RLSERVER_FAULT_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("fault seed %d (RLSERVER_FAULT_SEED=%d repeats it)", seed, seed)
	return seed
}

func netFaults(faultFor time.Duration) []netFault {
	return []netFault{
		{"isolated", "leader isolated from followers and clients", true, func(ft *faultTest, leader int) []int {
			ft.lab.split([]int{leader})
			ft.lab.cutHost(leader)
			return []int{leader}
		}},
		{"split", "majority/minority split, old leader in the minority", true, func(ft *faultTest, leader int) []int {
			ft.lab.split([]int{leader})
			return []int{leader}
		}},
		{"bridge", "bridge: the leader and a follower cannot see each other", false, func(ft *faultTest, leader int) []int {
			other := (leader + 1) % 3
			ft.lab.cut(leader, other)
			return []int{leader, other}
		}},
		{"changing", "partitions changing every 0.3-1.5 s", false, func(ft *faultTest, leader int) []int {
			end := time.Now().Add(faultFor)
			for time.Now().Before(end) {
				ft.lab.heal()
				a, b := ft.rng.IntN(3), ft.rng.IntN(3)
				what := "healed"
				switch ft.rng.IntN(4) {
				case 0:
					ft.lab.split([]int{a})
					what = fmt.Sprintf("n%d split off", a+1)
				case 1:
					ft.lab.split([]int{a})
					ft.lab.cutHost(a)
					what = fmt.Sprintf("n%d isolated", a+1)
				case 2:
					if a != b {
						ft.lab.cut(a, b)
						what = fmt.Sprintf("n%d-n%d cut", a+1, b+1)
					}
				}
				d := 300*time.Millisecond + time.Duration(ft.rng.Int64N(int64(1200*time.Millisecond)))
				ft.t.Logf("  %s for %v", what, d.Round(time.Millisecond))
				time.Sleep(d) // the fault lasts d
			}
			return []int{0, 1, 2}
		}},
		{"loss", "20% packet loss on every link", false, func(ft *faultTest, leader int) []int {
			ft.lab.lose(20)
			return []int{0, 1, 2}
		}},
	}
}

// faultFigures are what one run measured.
type faultFigures struct {
	maxGap  time.Duration // longest time with no node serving the prober
	back    time.Duration // from healing until every faulted node served
	lost    int64         // acknowledged units the final state lacks
	ops     int
	verdict porcupine.CheckResult
}

// TestClusterNetFaults runs each network fault once (RLSERVER_FAULTS=1:
// three rounds with longer faults) on a fresh cluster under load, and
// requires a linearizable history, no acknowledged decision lost, equal
// digests after healing, the faulted nodes serving again, and for a fault
// of a single node at most 2 s with no node serving.
func TestClusterNetFaults(t *testing.T) {
	rounds, faultFor := 1, 3*time.Second
	if faultLong() {
		rounds, faultFor = 3, 8*time.Second
	}
	seed := faultSeed(t)
	for i, f := range netFaults(faultFor) {
		t.Run(f.id, func(t *testing.T) {
			for r := range rounds {
				t.Run(fmt.Sprintf("round%d", r+1), func(t *testing.T) { // each cluster stops before the next starts
					checkNetFault(t, f, r, runNetFault(t, serverBin, f, faultFor, seed+uint64(i*100+r)))
				})
			}
		})
	}
}

// checkNetFault logs one run's figures and checks them.
func checkNetFault(t *testing.T, f netFault, r int, fig faultFigures) {
	t.Logf("%s, round %d: no node serving for at most %v; faulted nodes serve %v after healing; %d acknowledged units lost; %d operations %s",
		f.name, r+1, fig.maxGap.Round(time.Millisecond), fig.back.Round(time.Millisecond), fig.lost, fig.ops, fig.verdict)
	if fig.verdict != porcupine.Ok {
		t.Errorf("%s: history is %s (RL_PORCUPINE_HTML=file.html shows it)", f.name, fig.verdict)
	}
	if fig.lost != 0 {
		t.Errorf("%s: %d acknowledged units lost", f.name, fig.lost)
	}
	// The goal for a fault of one node is at most 2 s without service, met
	// with 0.4 s to spare here (the figures are in docs/cluster.md); CI's
	// shared machine asserts 4 s, which still catches a stalled cluster,
	// and the long run (make faults) holds the goal itself.
	gapBound := 4 * time.Second
	if faultLong() {
		gapBound = 2 * time.Second
	}
	if f.single && fig.maxGap > gapBound {
		t.Errorf("%s: no node served for %v, want at most %v", f.name, fig.maxGap, gapBound)
	}
}

// runNetFault starts a cluster in a fresh lab, loads it, applies the fault
// for faultFor (the changing partitions time themselves), heals, and
// measures.
func runNetFault(t *testing.T, bin string, f netFault, faultFor time.Duration, seed uint64) faultFigures {
	lab := newNetLab(t, 3)
	c := startClusterOf(t, bin, lab.nodes())
	ft := &faultTest{t: t, lab: lab, c: c, rng: rand.New(rand.NewPCG(seed, 23)), acked: map[string]int64{}}
	ld := startLoad(t, c, 6, 24, "nf")
	stopProbe := make(chan struct{})
	gapc := make(chan time.Duration)
	go ft.prober(stopProbe, gapc)
	time.Sleep(500 * time.Millisecond) // steady load before the fault

	leaderNode := c.waitLeader(10 * time.Second)
	leader := slices.Index(c.nodes, leaderNode)
	start := time.Now()
	faulted := f.apply(ft, leader)
	if rest := faultFor - time.Since(start); rest > 0 {
		time.Sleep(rest) // the fault lasts faultFor
	}
	lab.heal()
	healed := time.Now()
	var wg sync.WaitGroup
	backs := make([]time.Duration, len(faulted))
	for i, n := range faulted {
		wg.Add(1)
		go func() {
			defer wg.Done()
			backs[i] = ft.servedVia(c.nodes[n], healed, 15*time.Second)
		}()
	}
	wg.Wait()
	time.Sleep(500 * time.Millisecond) // load after healing
	close(stopProbe)
	fig := faultFigures{maxGap: <-gapc, back: slices.Max(backs)}
	ld.end()
	c.waitLeader(10 * time.Second)
	c.converge(20 * time.Second)
	fig.lost = ft.lost(ld.h)
	fig.ops = len(ld.h.ops)
	fig.verdict = ld.h.check(t, time.Minute)
	return fig
}

// probeClient is a client for one node with short timeouts and one dial
// attempt (go-redis tries five by default), so a prober moves on from an
// unreachable node quickly. Its timeouts count in the gaps it measures:
// up to 0.5 s per try of a node that does not answer.
func probeClient(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr: addr, Protocol: 2, MaxRetries: -1, DisableIdentity: true, PoolSize: 1,
		DialerRetries: 1, DialTimeout: 200 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// probe runs one RL.ALLOW of one unit on key and counts it if allowed.
func (ft *faultTest) probe(cl *redis.Client, key string) bool {
	return ft.probeErr(cl, key) == nil
}

func (ft *faultTest) probeErr(cl *redis.Client, key string) error {
	ok, _, err := allowOnce(context.Background(), cl, key, probeCap, 1)
	if err != nil {
		return err
	}
	if ok {
		ft.mu.Lock()
		ft.acked[key]++
		ft.mu.Unlock()
	}
	return nil
}

// prober tries the nodes in turn, moving on after every failure, until
// stop, and then sends the longest time between two decisions on gap.
func (ft *faultTest) prober(stop chan struct{}, gap chan<- time.Duration) {
	var clients []*redis.Client
	for _, n := range ft.c.nodes {
		clients = append(clients, probeClient(ft.t, n.respAddr))
	}
	last, longest, served := time.Now(), time.Duration(0), 0
	var fails, worst []string // the failed tries since last, and in the longest gap
	for i := 0; ; {
		select {
		case <-stop:
			gap <- max(longest, time.Since(last))
			if longest > time.Second {
				ft.t.Logf("the tries in the longest gap (%v): %s", longest.Round(time.Millisecond), strings.Join(worst, "; "))
			}
			return
		default:
		}
		tried := time.Now()
		if err := ft.probeErr(clients[i], fmt.Sprintf("probe%d", served/(probeCap/2))); err == nil {
			served++
			now := time.Now()
			if now.Sub(last) > longest {
				longest, worst = now.Sub(last), fails
			}
			last, fails = now, nil
			time.Sleep(2 * time.Millisecond)
		} else {
			fails = append(fails, fmt.Sprintf("+%v %s %v (%v)", tried.Sub(last).Round(time.Millisecond), ft.c.nodes[i].id, err, time.Since(tried).Round(time.Millisecond)))
			i = (i + 1) % len(clients)
		}
	}
}

// servedVia returns how long after since node n decides a command.
func (ft *faultTest) servedVia(n *cnode, since time.Time, limit time.Duration) time.Duration {
	cl := probeClient(ft.t, n.respAddr)
	for !ft.probe(cl, "back-"+n.id) {
		if time.Since(since) > limit {
			ft.t.Errorf("node %s not serving %v after healing", n.id, limit)
			return limit
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(since)
}

// lost counts the acknowledged units (allowed RL.ALLOW replies of the
// load and the probes) that the final state, read through the log, does
// not hold as taken.
func (ft *faultTest) lost(h *history) int64 {
	ft.t.Helper()
	want := map[string]int64{} // key -> units acknowledged
	capOf := map[string]int64{}
	h.mu.Lock()
	for _, op := range h.ops {
		in, out := op.Input.(allowIn), op.Output.(allowOut)
		capOf[in.key] = histCapacity
		if !out.unknown && out.allowed {
			want[in.key] += in.cost
		}
	}
	h.mu.Unlock()
	ft.mu.Lock()
	for k, v := range ft.acked {
		want[k], capOf[k] = v, probeCap
	}
	ft.mu.Unlock()
	leader := ft.c.waitLeader(10 * time.Second)
	cl := clusterClient(ft.t, leader.respAddr)
	var lost int64
	for k, units := range want {
		v, err := cl.Do(context.Background(), "RL.PEEK", k, capOf[k], "0.000001", 1).Int64Slice()
		if err != nil || len(v) != 4 {
			ft.t.Fatalf("RL.PEEK %s: %v %v", k, v, err)
		}
		left := v[1]
		if v[0] == 1 {
			left++ // PEEK reports what would be left after taking one
		}
		if taken := capOf[k] - left; taken < units {
			ft.t.Logf("%s: %d units acknowledged, %d taken", k, units, taken)
			lost += units - taken
		}
	}
	return lost
}

// TestClusterNetFaultPlantedBug runs the acknowledge-before-commit build
// under a bridge partition: porcupine must reject the history, so the
// checker is shown to work under network faults.
func TestClusterNetFaultPlantedBug(t *testing.T) {
	bin := plantedBugBinary(t)
	lab := newNetLab(t, 3)
	c := startClusterOf(t, bin, lab.nodes())
	ld := startLoad(t, c, 6, 4, "bug")
	time.Sleep(500 * time.Millisecond) // load before the fault
	leader := slices.Index(c.nodes, c.waitLeader(10*time.Second))
	lab.cut(leader, (leader+1)%3)
	time.Sleep(2 * time.Second) // the fault lasts 2 s
	lab.heal()
	time.Sleep(500 * time.Millisecond) // load after healing
	ld.end()
	if res := ld.h.check(t, time.Minute); res != porcupine.Illegal {
		t.Fatalf("porcupine says %s for the planted bug under a partition; want Illegal", res)
	}
}
