package command

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/rlserver/rlserver/engine"
)

// TestArgMemo checks that a connection's memo of limit arguments never
// changes what a command builds: a long random sequence of bucket commands
// through one memo builds the same requests and errors as each built with
// an empty memo. The arguments repeat often (the memo's hits) and differ
// in ways a wrong memo would confuse: another command, capacity or rate,
// the same number spelled differently, costs other than 1, bad input.
func TestArgMemo(t *testing.T) {
	names := []string{"rl.allow", "rl.peek", "rl.shape"}
	capacities := []string{"10", "010", "11", "0", "-1", "x", "9223372036854775807"}
	rates := []string{"1", "1.0", "0.5", "2", "nan", "inf", "0", "y", "1e-9"}
	costs := []string{"", "1", "01", "2", "0", "-1", "z"}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(s []string) string {
		if rng.IntN(3) > 0 {
			return s[0] // mostly the same arguments: memo hits
		}
		return s[rng.IntN(len(s))]
	}
	var memo Memo
	hits := 0
	for i := range 20000 {
		cmd := lookupLimiter([]byte(names[rng.IntN(len(names))]))
		args := [][]byte{[]byte(cmd.Name), []byte("key" + string(rune('a'+i%3))),
			[]byte(pick(capacities)), []byte(pick(rates))}
		if c := pick(costs); c != "" {
			args = append(args, []byte(c))
		}
		wasHit := memo.owner != nil && len(args) == 4 && memo.holds(memo.owner, args[2], args[3])
		got, gotErr := cmd.Batch(&memo, nil, args)
		want, wantErr := cmd.Batch(&Memo{}, nil, args)
		if gotErr != wantErr || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: with memo %+v %q, fresh %+v %q", args, got, gotErr, want, wantErr)
		}
		if wasHit && gotErr == "" {
			hits++
		}
	}
	if hits < 1000 {
		t.Fatalf("only %d memo hits: the test does not exercise the memo", hits)
	}
	// A limit the memo holds, asked by another command, is built by that
	// command: RL.PEEK after RL.ALLOW stays read-only.
	memo = Memo{}
	allow, peek := lookupLimiter([]byte("rl.allow")), lookupLimiter([]byte("rl.peek"))
	args := [][]byte{[]byte("rl.allow"), []byte("k"), []byte("10"), []byte("1")}
	if reqs, _ := allow.Batch(&memo, nil, args); len(reqs) != 1 || reqs[0].ReadOnly {
		t.Fatalf("RL.ALLOW built %+v", reqs)
	}
	reqs, _ := peek.Batch(&memo, nil, args)
	if len(reqs) != 1 || !reqs[0].ReadOnly || reqs[0].Op != engine.OpGCRA {
		t.Fatalf("RL.PEEK after RL.ALLOW built %+v, want a read-only GCRA request", reqs)
	}
}
