package server

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The token-bucket script of make bench-lua (bench/kvcompare), by EVALSHA
// through a real server over loopback, so a CPU profile shows where a
// script call's time goes (go test -run '^$' -bench EvalSHA -cpuprofile):
//
//	go test -run '^$' -bench 'EvalSHA|AllowRandom' -benchtime 3s -cpuprofile /tmp/cpu.out ./server/
//
// ns/call is per call, server and client together; the keys are random
// out of 100,000, as bench-lua's.

func benchCalls(b *testing.B, conns, depth int, prep func(c net.Conn, r *bufio.Reader) error, call func(rng *rand.Rand, now int64) string, lines int) {
	// One engine shard: cmd/rlserver's default on a machine of up to 7
	// CPUs, where make bench-lua runs.
	addr, _ := serveShards(b, Config{}, nil, 1)
	type client struct {
		c net.Conn
		r *bufio.Reader
	}
	cl := make([]client, conns)
	for i := range cl {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		cl[i] = client{c, bufio.NewReaderSize(c, 1<<16)}
		if i == 0 && prep != nil {
			if err := prep(c, cl[i].r); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	per := b.N/(conns*depth) + 1
	var wg sync.WaitGroup
	for ci, c := range cl {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(ci), 7))
			var out []byte
			for range per {
				out = out[:0]
				now := time.Now().UnixMilli()
				for range depth {
					out = append(out, call(rng, now)...)
				}
				if _, err := c.c.Write(out); err != nil {
					b.Error(err)
					return
				}
				for range depth * lines {
					l, err := c.r.ReadSlice('\n')
					if err != nil {
						b.Error(err)
						return
					}
					if l[0] == '-' {
						b.Errorf("error reply %q", l)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(per*conns*depth), "ns/call")
}

func BenchmarkEvalSHATokenBucket(b *testing.B) {
	src, err := os.ReadFile("../bench/kvcompare/token_bucket.lua")
	if err != nil {
		b.Fatal(err)
	}
	var sha string
	prep := func(c net.Conn, r *bufio.Reader) error {
		if _, err := c.Write([]byte(encode("SCRIPT", "LOAD", string(src)))); err != nil {
			return err
		}
		if _, err := r.ReadString('\n'); err != nil {
			return err
		}
		l, err := r.ReadString('\n')
		sha = l[:len(l)-2]
		return err
	}
	for _, depth := range []int{1, 32} {
		b.Run(fmt.Sprintf("P%d", depth), func(b *testing.B) {
			benchCalls(b, 50, depth, prep, func(rng *rand.Rand, now int64) string {
				return encode("EVALSHA", sha, "1", "tb:"+strconv.Itoa(rng.IntN(100_000)), "100", "10", strconv.FormatInt(now, 10), "1")
			}, 4)
		})
	}
}

func BenchmarkAllowRandom(b *testing.B) {
	for _, depth := range []int{1, 32} {
		b.Run(fmt.Sprintf("P%d", depth), func(b *testing.B) {
			benchCalls(b, 50, depth, nil, func(rng *rand.Rand, now int64) string {
				return encode("RL.ALLOW", "rl:"+strconv.Itoa(rng.IntN(100_000)), "100", "10", "1")
			}, 5)
		})
	}
}
