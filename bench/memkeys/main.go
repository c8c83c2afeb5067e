// Command memkeys measures the resident memory the engine holds per key.
//
// It fills a fresh engine with -keys keys of -keylen bytes
// ("user:000…0001" style) of one kind, each left with the state one call
// (log-10: ten calls) leaves, then reports the growth of the process's
// resident set (VmRSS in /proc/self/status) over the baseline taken before
// the engine existed, divided by the key count. Both readings follow
// runtime.GC and debug.FreeOSMemory, so the figure is what the keys
// themselves keep resident: the index, the key bytes and the state, with
// the allocator's slack but without garbage waiting for the collector.
// The Go heap held per key (HeapAlloc), the key tables mapped outside the
// heap per key (engine.OffHeapBytes: the slot arrays and key arenas of
// large tables), the fill time per key and the longest Do of a batch of
// 1000 inserts (which includes the index's rebuilds as it grows) are
// reported beside it. The process's peak resident set (VmHWM) growth per
// key shows what the fill needed at its worst (a table's rebuild holds
// the old and the new arrays for a moment).
//
// With -kind all, each kind is measured in a fresh child process, so no
// measurement inherits another's heap.
//
//	go run ./bench/memkeys                    # every kind, 1,000,000 keys of 21 bytes
//	go run ./bench/memkeys -kind allow -keys 5000000
//
// Linux only (it reads /proc/self/status).
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/engine"
)

// kind is one algorithm as memkeys fills it: the request for a key, and how
// many calls each key gets (all at one instant, all allowed).
type kind struct {
	name  string
	build func(key []byte) (engine.Request, error)
	calls int
}

// kinds use limits and windows long enough that every key stays live
// through the measurement.
var kinds = []kind{
	{"allow", func(k []byte) (engine.Request, error) { return engine.TokenBucket(k, 1000, 100, 1) }, 1},
	{"fixed", func(k []byte) (engine.Request, error) { return engine.Fixed(k, 1000, 60_000, 1) }, 1},
	{"sliding", func(k []byte) (engine.Request, error) { return engine.Sliding(k, 1000, 60_000, 1) }, 1},
	{"log", func(k []byte) (engine.Request, error) { return engine.Log(k, 100, 60_000, 1) }, 1},
	{"log-10", func(k []byte) (engine.Request, error) { return engine.Log(k, 10, 60_000, 1) }, 10},
	{"shape", func(k []byte) (engine.Request, error) { return engine.Shape(k, 1000, 100, 1) }, 1},
}

func main() {
	keys := flag.Int("keys", 1_000_000, "number of keys")
	keyLen := flag.Int("keylen", 21, "key length in bytes (at least 12)")
	kindName := flag.String("kind", "all", "allow, fixed, sliding, log, log-10, shape, or all (each in a child process)")
	shards := flag.Int("shards", runtime.NumCPU(), "engine shards (rlserver's default is the CPU count)")
	flag.Parse()
	if *keyLen < 12 || *keys < 1 {
		fmt.Fprintln(os.Stderr, "memkeys: -keylen must be at least 12 and -keys at least 1")
		os.Exit(2)
	}
	fmt.Printf("# %d keys of %d bytes, %d shards, %s %s/%s, GOGC=%s GOMEMLIMIT=%s\n",
		*keys, *keyLen, *shards, runtime.Version(), runtime.GOOS, runtime.GOARCH, os.Getenv("GOGC"), os.Getenv("GOMEMLIMIT"))
	fmt.Printf("%-8s %12s %12s %12s %12s %12s %12s\n", "kind", "rss B/key", "heap B/key", "offheap B/k", "peak B/key", "fill ns/key", "max Do ms")
	if *kindName != "all" {
		k, ok := find(*kindName)
		if !ok {
			fmt.Fprintf(os.Stderr, "memkeys: unknown kind %q\n", *kindName)
			os.Exit(2)
		}
		measure(k, *keys, *keyLen, *shards)
		return
	}
	for _, k := range kinds {
		args := []string{"-kind", k.name, "-keys", strconv.Itoa(*keys), "-keylen", strconv.Itoa(*keyLen), "-shards", strconv.Itoa(*shards)}
		out, err := exec.Command(os.Args[0], args...).Output()
		if err != nil {
			fmt.Fprintf(os.Stderr, "memkeys: %s: %v\n", k.name, err)
			os.Exit(1)
		}
		// The child's last line is its result.
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		fmt.Println(lines[len(lines)-1])
	}
}

func find(name string) (kind, bool) {
	for _, k := range kinds {
		if k.name == name {
			return k, true
		}
	}
	return kind{}, false
}

func measure(k kind, keys, keyLen, shards int) {
	const batch = 1000
	reqs := make([]engine.Request, batch)
	res := make([]engine.Result, batch)
	buf := make([]byte, batch*keyLen)
	ctx := context.Background()
	now := int64(1_700_000_000) * 1e9

	rss0, heap0 := settle()
	hwm0 := procStatus("VmHWM:")
	e := engine.New(shards)
	start := time.Now()
	var longest time.Duration
	for range k.calls {
		for i := 0; i < keys; i += batch {
			n := min(batch, keys-i)
			for j := range n {
				key := buf[j*keyLen : (j+1)*keyLen : (j+1)*keyLen]
				copy(key, "user:")
				fill(key[5:], i+j)
				r, err := k.build(key)
				if err != nil {
					panic(err)
				}
				reqs[j] = r
			}
			t := time.Now()
			if err := e.Do(ctx, now, reqs[:n], res[:n]); err != nil {
				panic(err)
			}
			longest = max(longest, time.Since(t))
			for j := range n {
				if !res[j].Allowed {
					panic(fmt.Sprintf("call on key %d denied", i+j))
				}
			}
		}
	}
	elapsed := time.Since(start)
	if n, err := e.Len(ctx, now); err != nil || n != keys {
		panic(fmt.Sprintf("Len = %d, %v; want %d", n, err, keys))
	}
	rss1, heap1 := settle()
	hwm1 := procStatus("VmHWM:")
	runtime.KeepAlive(e)
	perKey := func(n int64) float64 { return float64(n) / float64(keys) }
	fmt.Printf("%-8s %12.1f %12.1f %12.1f %12.1f %12.1f %12.2f\n", k.name,
		perKey(rss1-rss0), perKey(heap1-heap0), perKey(engine.OffHeapBytes()), perKey(hwm1-hwm0),
		float64(elapsed.Nanoseconds())/float64(keys*k.calls), float64(longest.Microseconds())/1000)
}

// fill writes i in decimal into b, zero-padded on the left.
func fill(b []byte, i int) {
	for j := len(b) - 1; j >= 0; j-- {
		b[j] = byte('0' + i%10)
		i /= 10
	}
}

// settle collects garbage, returns freed memory to the OS and reads the
// resident set and the live heap, in bytes.
func settle() (rss, heap int64) {
	runtime.GC()
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return procStatus("VmRSS:"), int64(ms.HeapAlloc)
}

// procStatus reads a size field of /proc/self/status (VmRSS, VmHWM), in
// bytes.
func procStatus(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		panic(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte(field)); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(string(rest)), " kB"), 10, 64)
			if err != nil {
				panic(err)
			}
			return kb << 10
		}
	}
	panic("no " + field + " in /proc/self/status")
}
