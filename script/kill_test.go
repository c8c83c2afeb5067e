package script_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/script"
)

// TestBusyAndKill: a looping script turns busy after the threshold, SCRIPT
// KILL stops it with Redis's error, and a script that wrote is
// unkillable.
func TestBusyAndKill(t *testing.T) {
	eng := script.New()
	run := &script.Running{}
	if err := run.Kill(); err == nil || err.Error() != script.ErrNotBusy {
		t.Fatalf("Kill with nothing running: %v", err)
	}
	caller := &kvCaller{t: t, e: engine.New(2), now: time.Now().UnixNano(), run: run}
	opts := &script.Options{Running: run, BusyAfter: 50 * time.Millisecond}

	done := make(chan error, 1)
	go func() {
		_, err := eng.Eval(context.Background(), []byte("local i = 0\nwhile true do\n i = i + 1\nend"), nil, nil, caller, opts)
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !run.Busy() {
		if time.Now().After(deadline) {
			t.Fatal("the script never turned busy")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := run.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	err := <-done
	var re *script.RunError
	if !errors.As(err, &re) || !strings.HasPrefix(re.Msg, "ERR Script killed by user with SCRIPT KILL... script: ") ||
		!strings.Contains(re.Msg, ", on @user_script:") {
		t.Fatalf("killed script: %v", err)
	}
	if run.Busy() || run.Active() {
		t.Fatal("still busy after the kill")
	}

	// A script that wrote cannot be killed; it ends on its own (the
	// context's deadline here).
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	go func() {
		_, err := eng.Eval(ctx, []byte("redis.call('set', KEYS[1], 'x')\nwhile true do end"), [][]byte{[]byte("k")}, nil, caller, opts)
		done <- err
	}()
	for !run.Written() {
		time.Sleep(5 * time.Millisecond)
	}
	if err := run.Kill(); err == nil || err.Error() != script.ErrUnkillable {
		t.Fatalf("Kill after a write: %v", err)
	}
	if err := <-done; err == nil {
		t.Fatal("the script outlived its context")
	}
	// The interpreter that was interrupted runs the next script normally.
	r, err := eng.Eval(context.Background(), []byte("return 1"), nil, nil, caller, nil)
	if err != nil || r.Int != 1 {
		t.Fatalf("after a kill: %v %v", r, err)
	}
}

func TestParseReplyRoundTrip(t *testing.T) {
	for _, in := range []string{
		":1\r\n", "$-1\r\n", "*-1\r\n", "$3\r\nabc\r\n", "+OK\r\n", "-ERR x\r\n",
		"*2\r\n:1\r\n$1\r\na\r\n", "_\r\n", "#t\r\n", ",1.5\r\n", "%1\r\n$1\r\na\r\n:1\r\n",
		"~1\r\n$1\r\na\r\n", "(123\r\n", "=7\r\ntxt:abc\r\n",
	} {
		r, n, err := script.ParseReply([]byte(in))
		if err != nil || n != len(in) {
			t.Fatalf("%q: %v %d", in, err, n)
		}
		resp3 := strings.ContainsAny(in[:1], "_#,%~(=")
		if out := r.Append(nil, resp3); string(out) != in {
			t.Errorf("%q: round trip gave %q", in, out)
		}
	}
	for _, bad := range []string{"", ":1", "$3\r\nab\r\n", "*2\r\n:1\r\n", "?\r\n"} {
		if _, _, err := script.ParseReply([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
