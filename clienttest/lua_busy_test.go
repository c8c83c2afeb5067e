package clienttest

import (
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
)

// A script that runs long: SCRIPT KILL stops one that has not written and
// refuses one that has (UNKILLABLE), with Redis's texts. A script runs on
// the engine shard of its keys, as Redis runs one on the whole server: a
// looping script stalls the commands on that shard (they wait, as Redis's
// clients wait for a script) and no command on another; past
// busy-reply-threshold every command answers BUSY but those Redis lets
// through a busy script (SCRIPT KILL, SHUTDOWN, AUTH...).

// keyOn returns the first key prefix0, prefix1, ... whose engine shard
// (of n) is, or with on false is not, the shard of key.
func keyOn(prefix, key string, on bool, n int) string {
	want := engine.ShardOf([]byte(key), n)
	for i := 0; ; i++ {
		k := prefix + strconv.Itoa(i)
		if (engine.ShardOf([]byte(k), n) == want) == on {
			return k
		}
	}
}

// tryRead reads one reply if one arrives within d.
func (rc *rawConn) tryRead(d time.Duration) (value, bool) {
	rc.t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(d))
	if _, err := rc.r.Peek(1); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return value{}, false
		}
		rc.t.Fatalf("reading a reply: %v", err)
	}
	return rc.read(), true
}

// silentFor checks that no reply arrives on rc within d.
func (rc *rawConn) silentFor(d time.Duration) {
	rc.t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(d))
	_, err := rc.r.Peek(1)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		rest, _ := rc.r.Peek(rc.r.Buffered())
		rc.t.Fatalf("read %q (%v) within %v, want nothing yet", rest, err, d)
	}
}

// Redis 7.0.15's texts (redis-server's replies, taken from a run).
const (
	luaKilledText     = "ERR Script killed by user with SCRIPT KILL..."
	luaUnkillableText = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command."
	luaBusyText       = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
	luaNotBusyText    = "NOTBUSY No scripts in execution right now."
)

// luaErrAt is a script error as Redis words it: the text, then the
// script's SHA1 and the line.
func luaErrAt(text, src string, line int) string {
	return text + " script: " + scriptSHA(src) + ", on @user_script:" + strconv.Itoa(line) + "."
}

// killWhenRunning sends SCRIPT KILL on c until it answers something other
// than NOTBUSY (the script has not started yet), and returns that reply.
func killWhenRunning(t *testing.T, c *rawConn) value {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.send(respCommand("SCRIPT", "KILL"))
		v := c.read()
		if v.kind != '-' || v.str != luaNotBusyText {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("SCRIPT KILL answers %v 10 s after the script was sent", v)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestLuaScriptKill(t *testing.T) {
	const shards = 4
	s := start(t, opts{args: []string{"--shards", strconv.Itoa(shards)}})
	ctl := s.raw(t)
	other := keyOn("other", "k", false, shards)   // on another shard than k
	n := keyOn("n", "k", false, shards)           // likewise
	neighbour := keyOn("near", "k", true, shards) // on k's shard
	ctl.do(respCommand("SET", other, "v"), "+OK\r\n")
	const loop = "while true do end"

	t.Run("LoopKilled", func(t *testing.T) {
		a := s.raw(t)
		a.send(respCommand("EVAL", loop, "1", "k"))
		// The script loops on k's shard: commands on other shards
		// answer; those on its shard wait for it (below the threshold
		// no BUSY).
		time.Sleep(100 * time.Millisecond)
		b := s.raw(t)
		b.send(respCommand("GET", "k"))
		c := s.raw(t)
		c.send(respCommand("GET", neighbour))
		ctl.do(respCommand("GET", other), "$1\r\nv\r\n")
		ctl.do(respCommand("EVAL", "return redis.call('incr', KEYS[1])", "1", n), ":1\r\n")
		b.silentFor(200 * time.Millisecond)
		c.silentFor(10 * time.Millisecond)
		if v := killWhenRunning(t, ctl); v.kind != '+' || v.str != "OK" {
			t.Fatalf("SCRIPT KILL of a script that wrote nothing: %v, want OK", v)
		}
		if v := a.read(); v.kind != '-' || v.str != luaErrAt(luaKilledText, loop, 1) {
			t.Errorf("the killed EVAL answers %v, want -%s", v, luaErrAt(luaKilledText, loop, 1))
		}
		// The waiting commands answer once it is gone.
		b.expect("$-1\r\n")
		c.expect("$-1\r\n")
		// The connection goes on.
		a.do(respCommand("GET", "k"), "$-1\r\n")
		ctl.do(respCommand("SCRIPT", "KILL"), "-"+luaNotBusyText+"\r\n")
	})

	t.Run("WrittenUnkillable", func(t *testing.T) {
		// A loop long enough to send SCRIPT KILL at it (about 1.5 s on
		// this machine and build), that ends by itself.
		const count = "for i = 1, tonumber(ARGV[1]) do end return 1"
		n := int64(2_000_000)
		began := time.Now()
		ctl.do(respCommand("EVAL", count, "0", strconv.FormatInt(n, 10)), ":1\r\n")
		took := max(time.Since(began), time.Millisecond)
		n = min(max(int64(float64(n)*1.5*float64(time.Second)/float64(took)), n), 5_000_000_000)

		src := "redis.call('set', KEYS[1], 'w') for i = 1, tonumber(ARGV[1]) do end return 'done'"
		a := s.raw(t)
		a.send(respCommand("EVAL", src, "1", "k", strconv.FormatInt(n, 10)))
		if v := killWhenRunning(t, ctl); v.kind != '-' || v.str != luaUnkillableText {
			t.Fatalf("SCRIPT KILL of a script that wrote: %v, want -%s", v, luaUnkillableText)
		}
		ctl.do(respCommand("GET", other), "$1\r\nv\r\n")
		// It runs to its end, and its write stays.
		a.expect("$4\r\ndone\r\n")
		ctl.do(respCommand("GET", "k"), "$1\r\nw\r\n")
		ctl.do(respCommand("DEL", "k"), ":1\r\n")
	})

	t.Run("BusyReply", func(t *testing.T) {
		// Redis's default busy-reply-threshold is 5 s; a test needs a
		// shorter one.
		ctl.send(respCommand("CONFIG", "SET", "busy-reply-threshold", "200"))
		if v := ctl.read(); v.kind == '-' {
			t.Fatalf("CONFIG SET busy-reply-threshold 200: %s", v.str)
		}
		a := s.raw(t)
		a.send(respCommand("EVAL", loop, "1", "k"))
		// A command sent before the threshold waits for the script; one
		// sent after it answers BUSY. Each probe is a new connection, so
		// one that waits does not hold up the next.
		var b *rawConn
		deadline := time.Now().Add(10 * time.Second)
		for {
			b = s.raw(t)
			b.send(respCommand("GET", "k"))
			if v, ok := b.tryRead(100 * time.Millisecond); ok && !v.null {
				if v.kind != '-' || v.str != luaBusyText {
					t.Fatalf("GET k while the script is busy: %v, want -%s", v, luaBusyText)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET k does not answer BUSY 10 s into a looping script")
			}
		}
		// As in Redis, every command answers BUSY, on any key or none,
		// but those Redis lets through (SCRIPT KILL, below).
		for _, cmd := range [][]string{{"SET", "k", "x"}, {"SET", neighbour, "x"}, {"GET", other}, {"PING"}, {"RL.ALLOW", other, "1", "1"}} {
			b.send(respCommand(cmd...))
			if v := b.read(); v.kind != '-' || v.str != luaBusyText {
				t.Errorf("%v while the script is busy: %v, want -%s", cmd, v, luaBusyText)
			}
		}
		ctl.do(respCommand("SCRIPT", "KILL"), "+OK\r\n")
		if v := a.read(); v.kind != '-' || v.str != luaErrAt(luaKilledText, loop, 1) {
			t.Errorf("the killed EVAL answers %v, want -%s", v, luaErrAt(luaKilledText, loop, 1))
		}
		b.do(respCommand("GET", "k"), "$-1\r\n")
		b.do(respCommand("GET", other), "$1\r\nv\r\n")
	})
}

// TestLimiterInMulti: limiter commands and a script queued in MULTI run in
// order on one copy of their keys and apply as one set of effects: the
// replies are those of running them one after the other, and the state
// after EXEC is theirs.
func TestLimiterInMulti(t *testing.T) {
	s := start(t, opts{})
	c := s.raw(t)
	c.send(respCommand("MULTI"))
	if v := c.read(); v.str != "OK" {
		t.Fatalf("MULTI: %+v", v)
	}
	for _, cmd := range [][]string{
		{"RL.ALLOW", "m", "2", "0.001"}, {"INCR", "cnt"}, {"RL.ALLOW", "m", "2", "0.001"},
		{"EVAL", "return redis.call('rl.allow', KEYS[1], 2, 0.001)", "1", "m"},
	} {
		c.send(respCommand(cmd...))
		if v := c.read(); v.str != "QUEUED" {
			t.Fatalf("%v: %+v, want QUEUED", cmd, v)
		}
	}
	c.send(respCommand("EXEC"))
	v := c.read()
	if v.kind != '*' || len(v.elems) != 4 {
		t.Fatalf("EXEC: %+v", v)
	}
	allowed := func(e value) int64 {
		if len(e.elems) != 4 {
			return -1
		}
		return e.elems[0].num
	}
	if allowed(v.elems[0]) != 1 || v.elems[1].num != 1 || allowed(v.elems[2]) != 1 || allowed(v.elems[3]) != 0 {
		t.Fatalf("EXEC replies %+v: want allowed, 1, allowed, denied", v.elems)
	}
	c.send(respCommand("RL.PEEK", "m", "2", "0.001"))
	if v := c.read(); allowed(v) != 0 {
		t.Fatalf("RL.PEEK after EXEC: %+v, want the bucket empty", v)
	}
}
