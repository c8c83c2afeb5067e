package clienttest

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// A script that runs long: SCRIPT KILL stops one that has not written and
// refuses one that has (UNKILLABLE), with Redis's texts; a looping script
// stalls no command on other keys; past busy-reply-threshold the commands
// on its keys answer BUSY.

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
	s := start(t, opts{args: []string{"--shards", "4"}})
	ctl := s.raw(t)
	ctl.do(respCommand("SET", "other", "v"), "+OK\r\n")
	const loop = "while true do end"

	t.Run("LoopKilled", func(t *testing.T) {
		a := s.raw(t)
		a.send(respCommand("EVAL", loop, "1", "k"))
		// The script loops: commands on its key and on others answer
		// (no shard is held; below the threshold no BUSY either).
		time.Sleep(100 * time.Millisecond)
		ctl.do(respCommand("GET", "other"), "$1\r\nv\r\n")
		ctl.do(respCommand("GET", "k"), "$-1\r\n")
		ctl.do(respCommand("EVAL", "return redis.call('incr', KEYS[1])", "1", "n"), ":1\r\n")
		if v := killWhenRunning(t, ctl); v.kind != '+' || v.str != "OK" {
			t.Fatalf("SCRIPT KILL of a script that wrote nothing: %v, want OK", v)
		}
		if v := a.read(); v.kind != '-' || v.str != luaErrAt(luaKilledText, loop, 1) {
			t.Errorf("the killed EVAL answers %v, want -%s", v, luaErrAt(luaKilledText, loop, 1))
		}
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
		ctl.do(respCommand("GET", "other"), "$1\r\nv\r\n")
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
		b := s.raw(t)
		deadline := time.Now().Add(10 * time.Second)
		for {
			b.send(respCommand("GET", "k"))
			v := b.read()
			if v.kind == '-' {
				if v.str != luaBusyText {
					t.Fatalf("GET k while the script is busy: %v, want -%s", v, luaBusyText)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET k answers %v, not BUSY, 10 s into a looping script", v)
			}
			time.Sleep(20 * time.Millisecond)
		}
		// Only its keys are busy.
		b.do(respCommand("GET", "other"), "$1\r\nv\r\n")
		b.send(respCommand("SET", "k", "x"))
		if v := b.read(); v.kind != '-' || !strings.HasPrefix(v.str, "BUSY ") {
			t.Errorf("SET k while the script is busy: %v, want BUSY", v)
		}
		ctl.do(respCommand("SCRIPT", "KILL"), "+OK\r\n")
		if v := a.read(); v.kind != '-' || v.str != luaErrAt(luaKilledText, loop, 1) {
			t.Errorf("the killed EVAL answers %v, want -%s", v, luaErrAt(luaKilledText, loop, 1))
		}
		b.do(respCommand("GET", "k"), "$-1\r\n")
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
