package server

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/engine"
)

// Blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN,
// BZPOPMAX, BZMPOP). The engine never parks a client: run with nothing to
// take, such a command replies the null Redis gives it inside MULTI (kv).
// Outside MULTI and scripts the edge then parks the client: its
// connection's goroutine waits, reading nothing more from it, as Redis
// stops reading a blocked client, and runs the same command again as an
// ordinary one when woken, until it takes an element, its timeout passes
// (a null array, Redis's timeout reply), CLIENT UNBLOCK ends it, or the
// client leaves.
//
// Each retry is a whole command through the backend (the Raft log in a
// cluster), so what it takes is decided there, once, as any other pop:
// replicas need no notion of blocked clients. A client is woken:
//   - after each pipeline of another client on this node that holds a
//     write (or EXEC, or a script), before that pipeline's replies are
//     flushed: the parked clients are retried one at a time, the longest
//     parked first, as Redis serves the client blocked first; a served
//     client's own write (BLMOVE's push) wakes the others in turn. So
//     LPUSH + DEL in one MULTI wakes nobody with an element, and the
//     pusher reads its reply after the blocked client has its element,
//     as in Redis.
//   - within applyWatch of a data write that reaches this node's replicas
//     any other way: in a cluster, a write through another node that this
//     node applies from the log (its leader's or a follower's copy).
//     While clients are parked, one goroutine reads the backend's count of
//     data writes (CmdWriter) every applyWatch and nudges them when it
//     moved; limiter decisions do not move it.
//   - every blockPoll, for what neither reaches: a write to a group this
//     node holds no replica of (--cluster-redirect forward).

// blockPoll is how often a parked client retries on its own.
const blockPoll = time.Second

// applyWatch is how often the parked clients' watcher reads CmdWrites.
const applyWatch = 10 * time.Millisecond

// CmdWriter counts the data commands that changed a key on this node's
// replicas (engine.Engine.CmdWrites), however they came: parked clients
// are retried when it moves (Config.CmdWriter).
type CmdWriter interface {
	CmdWrites() uint64
}

// watchApplies runs while clients are parked: it nudges them when the
// backend's count of data writes moves. It ends when none is parked.
func (s *Server) watchApplies(cw CmdWriter) {
	seen := cw.CmdWrites()
	t := time.NewTicker(applyWatch)
	defer t.Stop()
	for range t.C {
		if s.blocked.n.Load() == 0 {
			s.blocked.watching.Store(false)
			// A client that parked since the check found the flag still
			// set and counts on this goroutine.
			if s.blocked.n.Load() == 0 || !s.blocked.watching.CompareAndSwap(false, true) {
				return
			}
		}
		if n := cw.CmdWrites(); n != seen {
			seen = n
			s.blocked.mu.Lock()
			for _, w := range s.blocked.list {
				select {
				case w.nudge <- struct{}{}:
				default: // one is pending
				}
			}
			s.blocked.mu.Unlock()
		}
	}
}

// textUnblocked is the reply of a client that CLIENT UNBLOCK ... ERROR
// ends, as Redis's.
const textUnblocked = "UNBLOCKED client unblocked via CLIENT UNBLOCK"

// blockedSet is the parked clients, in the order they parked.
type blockedSet struct {
	n        atomic.Int64 // len(list), read without mu
	watching atomic.Bool  // watchApplies runs
	mu       sync.Mutex
	list     []*waiter
}

// waiter is a parked client. claimed is set while one goroutine runs its
// retry (the client's own, for a writer that woke it); again records a
// wake that came meanwhile, so the retry runs once more.
type waiter struct {
	id      int64         // the client's id (CLIENT UNBLOCK)
	try     chan struct{} // a writer claimed it: retry now
	tried   chan struct{} // the retry is done (the writer waits for it)
	kick    chan bool     // CLIENT UNBLOCK: true for ERROR, false for TIMEOUT
	nudge   chan struct{} // watchApplies: a data write was applied here
	claimed bool
	again   bool
}

func (b *blockedSet) add(w *waiter) {
	b.mu.Lock()
	w.claimed = true // the client's first retry, once parked
	b.list = append(b.list, w)
	b.n.Store(int64(len(b.list)))
	b.mu.Unlock()
}

func (b *blockedSet) remove(w *waiter) {
	b.mu.Lock()
	if i := slices.Index(b.list, w); i >= 0 {
		b.list = slices.Delete(b.list, i, i+1)
		b.n.Store(int64(len(b.list)))
	}
	b.mu.Unlock()
}

// claim takes w's retry for the caller; when another goroutine holds it,
// it asks that one to retry once more and reports false.
func (b *blockedSet) claim(w *waiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !slices.Contains(b.list, w) {
		return false
	}
	if w.claimed {
		w.again = true
		return false
	}
	w.claimed = true
	return true
}

// release gives w's retry up after it found nothing; it reports true,
// keeping the claim, when a wake came meanwhile.
func (b *blockedSet) release(w *waiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.again {
		w.again = false
		return true
	}
	w.claimed = false
	return false
}

// removeFree removes w unless a writer holds its retry.
func (b *blockedSet) removeFree(w *waiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.claimed {
		return false
	}
	if i := slices.Index(b.list, w); i >= 0 {
		b.list = slices.Delete(b.list, i, i+1)
		b.n.Store(int64(len(b.list)))
	}
	return true
}

// unblock asks the parked client id to stop waiting (CLIENT UNBLOCK).
func (b *blockedSet) unblock(id int64, withError bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, w := range b.list {
		if w.id == id {
			select {
			case w.kick <- withError:
			default: // already asked
			}
			return true
		}
	}
	return false
}

// wakeBlocked retries the parked clients, the longest parked first, each
// to its end, after a write.
func (s *Server) wakeBlocked() {
	if s.blocked.n.Load() == 0 {
		return
	}
	s.blocked.mu.Lock()
	list := slices.Clone(s.blocked.list)
	s.blocked.mu.Unlock()
	for _, w := range list {
		if s.blocked.claim(w) {
			w.try <- struct{}{}
			<-w.tried
		}
	}
}

// wakes reports whether cmd may give a parked client something to take.
func wakes(cmd *command.Cmd) bool {
	if cmd.Write || cmd == execCommand {
		return true
	}
	_, ok := evalCall(cmd)
	return ok
}

// runBlocking runs a blocking command outside MULTI and scripts: at once
// when there is something to take, else parked until there is.
func (s *Server) runBlocking(c *client, cmd *command.Cmd, args [][]byte) outcome {
	s.flushBatch(c) // the replies before it go first
	c.mu.Lock()
	c.lastCmd = cmd.Name
	c.mu.Unlock()
	t := c.st.at(cmd.ID)
	t.calls++
	reply := s.tryBlocking(c, cmd, args)
	if empty, _ := command.BlockingReply(reply); !empty {
		s.writeBlocked(c, t, reply)
		return cmdOK
	}
	// Parked: the arguments outlive the reader's buffer, which a closed
	// connection's check may refill.
	args = cloneArgs(args)
	var deadline <-chan time.Time
	if d := blockTimeout(cmd, args); d > 0 {
		tm := time.NewTimer(d)
		defer tm.Stop()
		deadline = tm.C
	}
	if err := c.rep.conn.w.Flush(); err != nil { // what came before, as Redis sends it
		return cmdQuit
	}
	w := &waiter{id: c.id, try: make(chan struct{}), tried: make(chan struct{}), kick: make(chan bool, 1), nudge: make(chan struct{}, 1)}
	s.blocked.add(w)
	if cw := s.cfg.CmdWriter; cw != nil && s.blocked.watching.CompareAndSwap(false, true) {
		go s.watchApplies(cw)
	}
	closed, stopWatch := watchClosed(c.rep.conn)
	defer stopWatch()
	poll := time.NewTicker(testBlockPoll())
	defer poll.Stop()
	// hold: this goroutine holds the claim and retries now; fromWriter: a
	// writer's wakeBlocked gave it and waits for the retry to end; end,
	// once set, is the reply to give if the last retry takes nothing.
	hold, fromWriter := true, false
	var end func()
	for {
		if hold {
			reply := s.tryBlocking(c, cmd, args)
			empty, wrongType := command.BlockingReply(reply)
			if wrongType && cmd.Name != "blmove" && cmd.Name != "brpoplpush" {
				// A key that now holds another type serves nobody, as in
				// Redis, which wakes a client only for a key of its type.
				// BLMOVE's WRONGTYPE may be its destination's: Redis
				// replies it (and gives the element back).
				empty = true
			}
			served := !empty
			done := served || end != nil
			again := false
			if done {
				s.blocked.remove(w)
			} else {
				again = s.blocked.release(w)
			}
			if served {
				s.writeBlocked(c, t, reply)
				s.wakeBlocked() // its own write (BLMOVE's push) may serve others
			} else if end != nil {
				end()
			}
			if fromWriter {
				w.tried <- struct{}{}
			}
			if done {
				return cmdOK
			}
			hold, fromWriter = again, false
			if hold {
				continue
			}
		}
		select {
		case <-w.try:
			hold, fromWriter = true, true
		case <-poll.C:
			hold = s.blocked.claim(w)
		case <-w.nudge:
			hold = s.blocked.claim(w)
		case withError := <-w.kick:
			end = func() { s.writeNullArray(c) }
			if withError {
				end = func() { c.rep.error(textUnblocked) }
			}
			if s.blocked.removeFree(w) {
				end()
				return cmdOK
			} // else a writer holds the retry: it comes, then end
		case <-deadline:
			end = func() { s.writeNullArray(c) }
			if s.blocked.removeFree(w) {
				end()
				return cmdOK
			}
		case <-closed:
			// Nobody reads the reply: take nothing for it.
			if !s.blocked.removeFree(w) {
				<-w.try
				s.blocked.remove(w)
				w.tried <- struct{}{}
			}
			return cmdQuit
		}
	}
}

// tryBlocking runs the command once, alone, and returns its reply.
func (s *Server) tryBlocking(c *client, cmd *command.Cmd, args [][]byte) string {
	reqs, errText := cmd.Batch(&c.memo, nil, args)
	defer c.memo.Release()
	if errText != "" {
		return "-" + errText + "\r\n"
	}
	res := make([]engine.Result, len(reqs))
	if err := s.backend.Do(context.Background(), reqs, res); err != nil {
		return "-" + command.Text(err) + "\r\n"
	}
	if err := command.FirstErr(res); err != nil {
		return "-" + command.Text(err) + "\r\n"
	}
	return res[0].Reply
}

// writeBlocked writes a blocking command's reply and counts an error.
func (s *Server) writeBlocked(c *client, t *connTally, reply string) {
	errs := c.rep.errors
	renderData(&c.rep, reply)
	if c.rep.errors != errs {
		t.failed++
	}
}

// writeNullArray is the reply of a blocking command that timed out.
func (s *Server) writeNullArray(c *client) {
	if c.memo.RESP3 {
		c.rep.conn.WriteRaw([]byte("_\r\n"))
	} else {
		c.rep.conn.WriteRaw([]byte("*-1\r\n"))
	}
}

// blockTimeout is the command's timeout argument (seconds, a float; kv
// has checked it); 0 waits forever.
func blockTimeout(cmd *command.Cmd, args [][]byte) time.Duration {
	at := len(args) - 1
	if cmd.Name == "blmpop" || cmd.Name == "bzmpop" {
		at = 1
	}
	sec, err := strconv.ParseFloat(string(bytes.TrimSpace(args[at])), 64)
	if err != nil || sec <= 0 {
		return 0
	}
	d := sec * float64(time.Second)
	if d > float64(1<<62) {
		return 0
	}
	return max(time.Duration(d), time.Millisecond)
}

func cloneArgs(args [][]byte) [][]byte {
	out := make([][]byte, len(args))
	for i, a := range args {
		out[i] = bytes.Clone(a)
	}
	return out
}
