package server

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
)

// benchPipeline drives a real server over loopback: conns connections each
// send pipelines of depth commands and read the replies, which take lines
// CRLF-terminated lines per command (5 for RL.ALLOW's 4-integer array, 1
// for PING). ns/op and allocs/op are per command, server and client
// together (the client allocates nothing per command).
func benchPipeline(b *testing.B, conns, depth, lines int, makeCmd func(i int) string) {
	addr, _ := startServer(b, Config{})
	benchPipelineAt(b, addr, conns, depth, lines, makeCmd)
}

// benchPipelineAt is benchPipeline against the server at addr.
func benchPipelineAt(b *testing.B, addr string, conns, depth, lines int, makeCmd func(i int) string) {
	var pipelines [][]byte
	for p := range 64 {
		var buf bytes.Buffer
		for i := range depth {
			buf.WriteString(makeCmd(p*depth + i))
		}
		pipelines = append(pipelines, buf.Bytes())
	}
	clients := make([]net.Conn, conns)
	for i := range clients {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		clients[i] = c
	}
	replyLen := make([]int, len(pipelines))
	buf := make([]byte, 1<<20)
	for p, pl := range pipelines {
		clients[0].Write(pl)
		n := 0
		for bytes.Count(buf[:n], []byte("\r\n")) < lines*depth {
			m, err := clients[0].Read(buf[n:])
			if err != nil {
				b.Fatal(err)
			}
			n += m
		}
		replyLen[p] = n
	}
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N/(conns*depth) + 1
	for ci, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			for k := range per {
				p := (ci + k) % len(pipelines)
				if _, err := c.Write(pipelines[p]); err != nil {
					b.Error(err)
					return
				}
				if _, err := io.ReadFull(c, buf[:replyLen[p]]); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(per*conns*depth), "ns/cmd")
}

func BenchmarkPipelineAllow(b *testing.B) {
	benchPipeline(b, 16, 32, 5, func(i int) string {
		return encode("RL.ALLOW", fmt.Sprintf("key:%012d", (i*7919)%100000), "100", "10", "1")
	})
}

func BenchmarkPipelinePing(b *testing.B) {
	benchPipeline(b, 16, 32, 1, func(int) string { return encode("PING") })
}
