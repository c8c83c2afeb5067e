//go:build !race

package server

import (
	"io"
	"net"
	"testing"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/standalone"
)

// TestProcessAllocs: taking an RL.ALLOW into the pending batch allocates
// nothing, without a SlotRouter (the routing check costs a nil test) and
// with one whose slot this node serves (one CRC16 and a Route call). The
// race detector's instrumentation allocates, hence the build tag.
func TestProcessAllocs(t *testing.T) {
	eng := engine.New(2)
	defer eng.Close()
	for _, routed := range []bool{false, true} {
		var backend Backend = standalone.New(eng, nil)
		var cfg Config
		if routed {
			b := newSlotBackend(t, threeNodes())
			backend, cfg.Router = b, b
		}
		s := New(cfg, backend)
		nc, peer := net.Pipe()
		defer nc.Close()
		go io.Copy(io.Discard, peer)
		c := newClient(1, newConn(nc, 1<<20), s.env)
		c.user = s.initialUser()
		key := []byte(keyIn("k", 0, 5460)) // a's, this node's
		args := [][]byte{[]byte("RL.ALLOW"), key, []byte("10"), []byte("1")}
		run := func() {
			s.process(c, args)
			if len(c.pending) != 1 || c.pending[0].errText != "" || len(c.reqs) != 1 {
				t.Fatalf("routed %v: pending %+v, want one batched request", routed, c.pending)
			}
			c.pending = c.pending[:0]
			c.reqs = c.reqs[:0]
		}
		run()
		if n := testing.AllocsPerRun(1000, run); n != 0 {
			t.Errorf("routed %v: %v allocations per RL.ALLOW, want 0", routed, n)
		}
	}
}
