// Package clusterload holds the loads the cluster benchmarks
// (bench/moves, bench/scaleout) drive through a go-redis ClusterClient:
// RL.ALLOW on keys chosen by hash slot, a fill, closed-loop single
// requests and pipelines that record every sample, and the summary of a
// time window of samples.
package clusterload

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/slots"
)

// The limit every key gets: a bucket of 1000 tokens refilling at one per
// 10,000 s, so a key the fill touched stays (a full bucket is dropped as
// expired) for the whole benchmark, and no run drains one.
const (
	LimitCapacity = "1000"
	LimitRate     = "0.0001"
)

// AllowArgs is RL.ALLOW on key with that limit and a cost of 1.
func AllowArgs(key string) []any {
	return []any{"RL.ALLOW", key, LimitCapacity, LimitRate, "1"}
}

// NewClusterClient is the go-redis ClusterClient every load uses: enough
// redirects to follow a move, a read timeout above the servers' commit
// timeout (a request on a moving range waits up to it), and a 1 s state
// reload as docs/cluster-mode.md recommends.
func NewClusterClient(addrs []string, commitTimeout time.Duration, pool int) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                      addrs,
		MaxRedirects:               16,
		ReadTimeout:                commitTimeout + 3*time.Second,
		WriteTimeout:               commitTimeout + 3*time.Second,
		PoolSize:                   pool,
		ClusterStateReloadInterval: time.Second,
	})
}

// KeysInRange returns n keys prefix<i> whose hash slot lies in [lo, hi],
// for i = 0, 1, ... (CRC16, as every Redis Cluster client hashes them).
func KeysInRange(prefix string, lo, hi, n int) []string {
	out := make([]string, 0, n)
	for i := 0; len(out) < n; i++ {
		k := prefix + itoa(i)
		if s := slots.OfString(k); s >= lo && s <= hi {
			out = append(out, k)
		}
	}
	return out
}

// KeysOutside returns n keys prefix<i> whose slot lies outside every
// range of skip ([lo, hi] pairs).
func KeysOutside(prefix string, skip [][2]int, n int) []string {
	out := make([]string, 0, n)
	for i := 0; len(out) < n; i++ {
		k := prefix + itoa(i)
		s := slots.OfString(k)
		in := false
		for _, r := range skip {
			if s >= r[0] && s <= r[1] {
				in = true
			}
		}
		if !in {
			out = append(out, k)
		}
	}
	return out
}

// itoa is strconv.itoa for i >= 0, without its small-number cache check.
func itoa(i int) string {
	var b [20]byte
	p := len(b)
	for {
		p--
		b[p] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			return string(b[p:])
		}
	}
}

// Fill sends one RL.ALLOW per key through the cluster client, in
// pipelines of batch keys over conns goroutines, and returns the keys per
// second.
func Fill(cc *redis.ClusterClient, keys []string, conns, batch int) (float64, error) {
	start := time.Now()
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for {
				i := int(next.Add(int64(batch))) - batch
				if i >= len(keys) {
					return
				}
				part := keys[i:min(i+batch, len(keys))]
				// A key whose RL.ALLOW failed (a leader change under
				// load: UNKNOWN, CLUSTERDOWN) is sent again; charging a
				// key twice does not matter here.
				var err error
				for try := 0; len(part) > 0 && try < 5; try++ {
					if try > 0 {
						time.Sleep(200 * time.Millisecond)
					}
					var cmds []redis.Cmder
					cmds, err = cc.Pipelined(ctx, func(p redis.Pipeliner) error {
						for _, k := range part {
							p.Do(ctx, AllowArgs(k)...)
						}
						return nil
					})
					var again []string
					for j, c := range cmds {
						if c.Err() != nil {
							again = append(again, part[j])
						}
					}
					if len(cmds) == 0 {
						again = part
					}
					part = again
				}
				if len(part) == 0 {
					err = nil
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return float64(len(keys)) / time.Since(start).Seconds(), firstErr
}

// Sample is one timed request (or pipeline) of a running load.
type Sample struct {
	Start time.Time
	Lat   time.Duration
	N     int    // decisions it carried
	Err   string // "" when every reply was a decision
}

// Load runs workers that record samples until stopped.
type Load struct {
	stopped atomic.Bool
	wg      sync.WaitGroup
	mu      sync.Mutex
	samples []Sample
}

func (l *Load) add(s []Sample) {
	l.mu.Lock()
	l.samples = append(l.samples, s...)
	l.mu.Unlock()
}

// Stop stops the workers and returns every sample, in start order.
func (l *Load) Stop() []Sample {
	l.stopped.Store(true)
	l.wg.Wait()
	slices.SortFunc(l.samples, func(a, b Sample) int { return a.Start.Compare(b.Start) })
	return l.samples
}

// Singles starts workers that each send one RL.ALLOW at a time on a
// random key of keys (closed loop): each sample is one request's latency
// as the client sees it, MOVED and TRYAGAIN retries included.
func Singles(cc *redis.ClusterClient, keys []string, workers int) *Load {
	l := &Load{}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			ctx := context.Background()
			var buf []Sample
			for !l.stopped.Load() {
				k := keys[rng.IntN(len(keys))]
				t := time.Now()
				err := cc.Do(ctx, AllowArgs(k)...).Err()
				buf = append(buf, Sample{Start: t, Lat: time.Since(t), N: 1, Err: ErrClass(err)})
				if len(buf) == 4096 {
					l.add(buf)
					buf = buf[:0]
				}
			}
			l.add(buf)
		}()
	}
	return l
}

// Pipelines starts workers that each send pipelines of depth RL.ALLOWs on
// random keys of keys (closed loop; go-redis splits each by node).
func Pipelines(cc *redis.ClusterClient, keys []string, workers, depth int) *Load {
	l := &Load{}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			ctx := context.Background()
			var buf []Sample
			for !l.stopped.Load() {
				t := time.Now()
				cmds, err := cc.Pipelined(ctx, func(p redis.Pipeliner) error {
					for range depth {
						p.Do(ctx, AllowArgs(keys[rng.IntN(len(keys))])...)
					}
					return nil
				})
				s := Sample{Start: t, Lat: time.Since(t)}
				for _, c := range cmds {
					if c.Err() == nil {
						s.N++
					} else if s.Err == "" {
						s.Err = ErrClass(c.Err())
					}
				}
				if s.Err == "" && err != nil {
					s.Err = ErrClass(err)
				}
				buf = append(buf, s)
				if len(buf) == 4096 {
					l.add(buf)
					buf = buf[:0]
				}
			}
			l.add(buf)
		}()
	}
	return l
}

// ErrClass names an error by its first word (TRYAGAIN, MOVED, ...), or
// "timeout".
func ErrClass(err error) string {
	if err == nil {
		return ""
	}
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	s := err.Error()
	if i := strings.IndexByte(s, ' '); i > 0 {
		s = s[:i]
	}
	return s
}

// Window is what the samples that started in [from, to) show.
type Window struct {
	Requests int // samples
	PerSec   float64
	P50, P99 time.Duration
	Max      time.Duration
	Errs     map[string]int
}

// Summarize is what the samples of ss that started in [from, to) show.
func Summarize(ss []Sample, from, to time.Time) Window {
	w := Window{Errs: map[string]int{}}
	var lats []time.Duration
	decisions := 0
	for _, s := range ss {
		if s.Start.Before(from) || !s.Start.Before(to) {
			continue
		}
		w.Requests++
		decisions += s.N
		lats = append(lats, s.Lat)
		if s.Err != "" {
			w.Errs[s.Err]++
		}
	}
	if d := to.Sub(from).Seconds(); d > 0 {
		w.PerSec = float64(decisions) / d
	}
	if len(lats) == 0 {
		return w
	}
	slices.Sort(lats)
	q := func(p float64) time.Duration { return lats[min(len(lats)-1, int(p*float64(len(lats))))] }
	w.P50, w.P99, w.Max = q(0.50), q(0.99), lats[len(lats)-1]
	return w
}
