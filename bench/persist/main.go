// Command persist measures snapshots, by hand (the figures are in
// docs/persistence.md):
//
//	go run ./bench/persist saveload -keys 1000000
//	    in-process: fill an engine, then time the capture (export and
//	    sort), the write (encode, fsync, rename), the read and the import,
//	    and report file bytes per key and the capture's memory.
//
//	go run ./bench/persist latency -addr 127.0.0.1:6379 -keys 1000000
//	    against a running rlserver (start it with --save-interval 0): fill
//	    it, then measure RL.ALLOW round trips from several clients, first
//	    with no save running, then while BGSAVE runs back to back, and
//	    report both latency distributions.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/persist"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: persist saveload|latency [flags]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "saveload":
		saveLoad(os.Args[2:])
	case "latency":
		latency(os.Args[2:])
	default:
		fmt.Fprintln(os.Stderr, "usage: persist saveload|latency [flags]")
		os.Exit(2)
	}
}

func key(i int) []byte { return []byte("user:" + strconv.Itoa(10_000_000+i)) }

func heapMB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

func saveLoad(args []string) {
	fs := flag.NewFlagSet("saveload", flag.ExitOnError)
	keys := fs.Int("keys", 1_000_000, "keys to fill")
	shards := fs.Int("shards", runtime.NumCPU(), "engine shards")
	dir := fs.String("dir", "", "folder for the snapshot (default: a temporary one)")
	mixed := fs.Bool("mixed", false, "every kind of state in turn, instead of token buckets only")
	fs.Parse(args)
	if *dir == "" {
		d, err := os.MkdirTemp("", "rlbench-")
		check(err)
		defer os.RemoveAll(d)
		*dir = d
	}
	ctx := context.Background()
	now := time.Now().UnixNano()
	e := engine.New(*shards)
	defer e.Close()
	t := time.Now()
	fill(e, now, *keys, *mixed)
	heap0 := heapMB()
	fmt.Printf("keys %d, shards %d, mixed %v: filled in %v, heap %.0f MB (%.0f B/key)\n",
		*keys, *shards, *mixed, time.Since(t).Round(time.Millisecond), heap0, heap0*(1<<20)/float64(*keys))

	store, err := persist.Open(*dir)
	check(err)
	peak := sampleHeap()
	sv := persist.NewSaver(store, e, 0, nil)
	for _, name := range []string{"first save", "second save (sized from the first)"} {
		peak.reset()
		check(sv.Save(ctx))
		st := sv.Status()
		fmt.Printf("%s: %v (copy and sort %v, write %v); file %d bytes, %.1f B/key; heap peak +%.0f MB (%.0f B/key)\n",
			name, st.LastDuration.Round(time.Millisecond), st.LastCapture.Round(time.Millisecond), (st.LastDuration - st.LastCapture).Round(time.Millisecond),
			st.LastBytes, float64(st.LastBytes)/float64(st.LastKeys), peak.max()-heap0, (peak.max()-heap0)*(1<<20)/float64(st.LastKeys))
	}
	check(sv.Close(ctx))
	e.Close()

	base := heapMB()
	e2 := engine.New(*shards)
	defer e2.Close()
	peak.reset()
	ls, err := store.Load(ctx, e2, now)
	check(err)
	fmt.Printf("load: %v for %d keys; heap peak +%.0f MB over the loaded state's %.0f MB\n",
		ls.Duration.Round(time.Millisecond), ls.Records, peak.max()-heapMB(), heapMB()-base)
}

// heapPeak samples the heap every 5 ms.
type heapPeak struct {
	mu  sync.Mutex
	top uint64
}

func sampleHeap() *heapPeak {
	p := &heapPeak{}
	go func() {
		var m runtime.MemStats
		for range time.Tick(5 * time.Millisecond) {
			runtime.ReadMemStats(&m)
			p.mu.Lock()
			p.top = max(p.top, m.HeapAlloc)
			p.mu.Unlock()
		}
	}()
	return p
}

func (p *heapPeak) reset() { p.mu.Lock(); p.top = 0; p.mu.Unlock() }

func (p *heapPeak) max() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return float64(p.top) / (1 << 20)
}

// fill applies one request per key in batches.
func fill(e *engine.Engine, now int64, keys int, mixed bool) {
	const batch = 4096
	reqs := make([]engine.Request, 0, batch)
	res := make([]engine.Result, batch)
	flush := func() {
		check(e.Do(context.Background(), now, reqs, res[:len(reqs)]))
		reqs = reqs[:0]
	}
	for i := range keys {
		k := key(i)
		var r engine.Request
		var err error
		switch {
		case !mixed || i%5 == 0:
			r, err = engine.TokenBucket(k, 100, 0.001, 1+int64(i%7))
		case i%5 == 1:
			r, err = engine.Fixed(k, 100, 3_600_000, 1+int64(i%7))
		case i%5 == 2:
			r, err = engine.Sliding(k, 100, 3_600_000, 1+int64(i%7))
		case i%5 == 3:
			r, err = engine.Log(k, 100, 3_600_000, 1+int64(i%3))
		default:
			r, err = engine.Shape(k, 100, 0.001, 1+int64(i%7))
		}
		check(err)
		reqs = append(reqs, r)
		if len(reqs) == batch {
			flush()
		}
	}
	if len(reqs) > 0 {
		flush()
	}
}

func latency(args []string) {
	fs := flag.NewFlagSet("latency", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:6379", "rlserver address")
	keys := fs.Int("keys", 1_000_000, "keys to fill")
	clients := fs.Int("clients", 8, "concurrent clients, one request in flight each")
	dur := fs.Duration("duration", 10*time.Second, "length of each phase")
	fs.Parse(args)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: *clients + 2})
	defer c.Close()
	check(c.FlushAll(ctx).Err())
	t := time.Now()
	for i := 0; i < *keys; i += 10_000 {
		p := c.Pipeline()
		for j := i; j < min(i+10_000, *keys); j++ {
			p.Do(ctx, "RL.ALLOW", key(j), 1000, 0.001)
		}
		_, err := p.Exec(ctx)
		check(err)
	}
	fmt.Printf("filled %d keys in %v\n", *keys, time.Since(t).Round(time.Millisecond))
	check(c.Save(ctx).Err())
	size := info(ctx, c, "rl_last_save_bytes")
	fmt.Printf("SAVE of %s keys: %s µs, %s bytes\n", info(ctx, c, "rl_last_save_keys"), info(ctx, c, "rl_last_save_duration_us"), size)

	base := run(ctx, c, *keys, *clients, *dur, nil)
	report("no save", base)
	var saves, failed int
	var saveDur []time.Duration
	during := run(ctx, c, *keys, *clients, *dur, func(stop <-chan struct{}) {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := c.BgSave(ctx).Err(); err != nil {
				failed++
				time.Sleep(time.Millisecond)
				continue
			}
			for info(ctx, c, "rdb_bgsave_in_progress") == "1" {
				time.Sleep(time.Millisecond)
			}
			saves++
			us, _ := strconv.Atoi(info(ctx, c, "rl_last_save_duration_us"))
			saveDur = append(saveDur, time.Duration(us)*time.Microsecond)
		}
	})
	report(fmt.Sprintf("BGSAVE back to back (%d saves, median %v)", saves, median(saveDur)), during)
}

func info(ctx context.Context, c *redis.Client, field string) string {
	s, err := c.Info(ctx, "persistence").Result()
	check(err)
	for _, l := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return v
		}
	}
	return ""
}

// run measures RL.ALLOW round trips on random keys for d, while bg runs.
func run(ctx context.Context, c *redis.Client, keys, clients int, d time.Duration, bg func(stop <-chan struct{})) []time.Duration {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	lat := make([][]time.Duration, clients)
	for i := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				t := time.Now()
				if err := c.Do(ctx, "RL.ALLOW", key(rng.IntN(keys)), 1000, 0.001).Err(); err != nil {
					panic(err)
				}
				lat[i] = append(lat[i], time.Since(t))
			}
		})
	}
	bgDone := make(chan struct{})
	go func() {
		defer close(bgDone)
		if bg != nil {
			bg(stop)
		}
	}()
	time.Sleep(d)
	close(stop)
	wg.Wait()
	<-bgDone
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	return all
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond)
}

func report(name string, l []time.Duration) {
	q := func(p float64) time.Duration { return l[min(len(l)-1, int(p*float64(len(l))))].Round(time.Microsecond) }
	fmt.Printf("%s: %d requests, p50 %v, p99 %v, p99.9 %v, max %v\n", name, len(l), q(0.5), q(0.99), q(0.999), l[len(l)-1].Round(time.Microsecond))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
