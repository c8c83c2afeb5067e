package server

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/policy"
)

// startPolicyServer serves a fresh engine with a policy store.
func startPolicyServer(t testing.TB, cfg Config) (string, *Server, *policy.Store) {
	t.Helper()
	store := policy.NewStore()
	addr, srv := serveStandalone(t, cfg, store)
	return addr, srv, store
}

// The rate 0.001/s refills nothing during a test; the reset field counts
// down from 1000 s per token used, so it is checked as a prefix.
func TestPolicyCommands(t *testing.T) {
	addr, _, _ := startPolicyServer(t, Config{})
	exchange(t, addr,
		[2]string{"RL.POLICY SET login ALLOW 2 0.001", "OK"},
		[2]string{"RL.POLICY SET ip fixed 10 60000", "OK"},
		[2]string{"RL.POLICY SET shape SHAPE 3 1e-3", "OK"},
		[2]string{"RL.POLICY GET shape", "[shape SHAPE 3 0.001]"},
		[2]string{"RL.POLICY GET none", "(nil)"},
		[2]string{"RL.POLICY LIST", "[[ip FIXED 10 60000] [login ALLOW 2 0.001] [shape SHAPE 3 0.001]]"},
		[2]string{"RL.POLICY SET x ALLOW 0 1", "-ERR capacity must be an integer >= 1"},
		[2]string{"RL.POLICY SET x ALLOW 1", "-" + command.ErrPolicyArity},
		[2]string{"RL.POLICY SET x BUCKET 1 1", "-" + command.ErrPolicyKind},
		[2]string{"RL.POLICY SET a:b ALLOW 1 1", "-" + command.ErrPolicyBadName},
		[2]string{"RL.POLICY SET x FIXED 1 x", "-" + command.ErrNotInteger},
		[2]string{"RL.POLICY SET x ALLOW 1 x", "-" + command.ErrNotFloat},
		[2]string{"RL.POLICY SET", "-ERR wrong number of arguments for 'rl.policy|set' command"},
		[2]string{"RL.POLICY LOAD", "-" + command.ErrNoPolicyFile},
		[2]string{"RL.POLICY DEL ip", ":1"},
		[2]string{"RL.POLICY DEL ip", ":0"},
		[2]string{"RL.CHECK login u1", "[:1 :1 [login u1 :1 :2 :1 :0 :1000000 :0]]"},
		[2]string{"RL.CHECK COST 0 login u1", "[:1 :1 [login u1 :1 :2 :1 :0 :*"},
		// Allowed: the deciding tier has the fewest remaining.
		[2]string{"RL.CHECK login u1 shape q1", "[:1 :1 [login u1 :1 :2 :0 :0 :*"},
		[2]string{"RL.CHECK COST 0 shape q1", "[:1 :1 [shape q1 :1 :3 :2 :0 :*"},
		// Rejected: the second tier rejects, the first is not charged.
		[2]string{"RL.CHECK shape q1 login u1", "[:0 :2 [shape q1 :1 :3 :1 :0 :*"},
		[2]string{"RL.CHECK COST 0 shape q1", "[:1 :1 [shape q1 :1 :3 :2 :0 :*"},
		[2]string{"RL.CHECK COST 2 shape q1", "[:1 :1 [shape q1 :1 :3 :0 :0 :*"},
		[2]string{"RL.CHECK ip k", "-ERR unknown policy 'ip'"},
		[2]string{"RL.CHECK login k login k", "-ERR key 'k' appears twice in one RL.CHECK"},
		[2]string{"RL.CHECK login k shape", "-ERR syntax error"},
		[2]string{"RL.CHECK COST -1 login k", "-ERR cost must be an integer >= 0"},
		[2]string{"RL.CHECK COST x login k", "-" + command.ErrNotInteger},
		[2]string{"RL.CHECK COST 1 login", "-ERR wrong number of arguments for 'rl.check' command"},
		[2]string{"RL.CHECK bad/name k", "-ERR unknown policy 'bad/name'"},
		[2]string{"RL.FIXED plain 1 1000", "[:1 :0 :0 :*"},
		[2]string{"RL.CHECK login plain", "-" + command.ErrWrongType},
		[2]string{"COMMAND GETKEYS RL.CHECK COST 3 a k1 b k2", "[k1 k2]"},
		[2]string{"COMMAND GETKEYS RL.CHECK a k1 b k2", "[k1 k2]"},
	)
}

// TestCheckInPipelineInOrder: RL.CHECK joins a pipeline's batch with the
// other limiter commands and is answered in order, a failed group
// charging nothing.
func TestCheckInPipelineInOrder(t *testing.T) {
	addr, _, store := startPolicyServer(t, Config{})
	p, _ := policy.Parse([]string{"one", "ALLOW", "1", "0.001"})
	store.Set(p)
	exchange(t, addr,
		[2]string{"RL.ALLOW a 5 0.001", "[:1 :4 :0 :1000000]"},
		[2]string{"RL.CHECK one k1 gone k2", "-ERR unknown policy 'gone'"},
		[2]string{"PING", "PONG"},
		[2]string{"RL.CHECK one k1", "[:1 :1 [one k1 :1 :1 :0 :0 :1000000 :0]]"},
		[2]string{"RL.ALLOW a 5 0.001", "[:1 :3 :0 :*"}, // reset_after counts down from 2000000 ms across batches
		[2]string{"RL.CHECK one k2 one k3", "[:1 :1 [one k2 :1 :1 :0 :0 :1000000 :0] [one k3 :1 :1 :0 :0 :1000000 :0]]"},
		[2]string{"RL.CHECK one k1", "[:0 :1 [one k1 :0 :1 :0 :*"},
	)
}

func TestPolicyLoadAndInfo(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policies")
	os.WriteFile(file, []byte("# test\na ALLOW 1 0.001\nb FIXED 2 1000\n"), 0o644)
	addr, srv, store := startPolicyServer(t, Config{PolicyFile: file})
	exchange(t, addr,
		[2]string{"RL.POLICY SET c ALLOW 1 1", "OK"},
		[2]string{"RL.POLICY LOAD", "OK"},
		[2]string{"RL.POLICY LIST", "[[a ALLOW 1 0.001] [b FIXED 2 1000]]"},
		[2]string{"RL.CHECK a k", "[:1 :1 [a k :1 :1 :0 :0 :1000000 :0]]"},
		[2]string{"RL.CHECK a k", "[:0 :1 [a k :0 :1 :0 :*"},
	)
	os.WriteFile(file, []byte("a ALLOW 1 1\n\nb FIXED 0 1000\n"), 0o644)
	exchange(t, addr,
		[2]string{"RL.POLICY LOAD", "-ERR policy file line 3: limit must be an integer >= 1"},
		[2]string{"RL.POLICY GET a", "[a ALLOW 1 0.001]"},
	)
	if _, err := srv.ReloadPolicies(context.Background()); err == nil {
		t.Error("ReloadPolicies of a bad file succeeded")
	}
	if st := store.Stats(); len(st) != 2 || st[0] != (policy.Stat{Name: "a", Allowed: 1, Denied: 1}) {
		t.Errorf("stats %+v", st)
	}
	c, r := dial(t, addr)
	io.WriteString(c, encode("INFO", "policies"))
	info := readReply(t, r)
	for _, want := range []string{"# Policies\r\n", "policies:2\r\n", "policy_a:allowed=1,denied=1\r\n", "policy_b:allowed=0,denied=0\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO policies lacks %q:\n%s", want, info)
		}
	}
}

// TestCheckKeysUnderACL: RL.CHECK's keys (after COST n when given) are
// checked against the user's key patterns; policy changes are admin.
func TestCheckKeysUnderACL(t *testing.T) {
	acl, err := ParseACL([]byte("user app on >pw ~k* +@ratelimit -@dangerous\nuser default on >d ~* +@all\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	addr, _, store := startPolicyServer(t, Config{ACL: acl})
	p, _ := policy.Parse([]string{"p", "ALLOW", "5", "1"})
	store.Set(p)
	exchange(t, addr,
		[2]string{"AUTH app pw", "OK"},
		[2]string{"RL.CHECK COST 2 p k1 p k2", "[:1 *"},
		[2]string{"RL.CHECK p k1 p other", "-" + command.ErrNoPermKey},
		[2]string{"RL.CHECK COST 1 p other", "-" + command.ErrNoPermKey},
		[2]string{"RL.POLICY GET p", "[p ALLOW 5 1]"},
		[2]string{"RL.POLICY SET p ALLOW 1 1", "-NOPERM User app has no permissions to run the 'rl.policy|set' command"},
	)
}

// TestCheckWithoutPolicies: a server that keeps none answers RL.CHECK
// with unknown policy and still runs the rest of the batch.
func TestCheckWithoutPolicies(t *testing.T) {
	addr, _ := startServer(t, Config{})
	exchange(t, addr,
		[2]string{"RL.ALLOW a 5 0.001", "[:1 :4 :0 :1000000]"},
		[2]string{"RL.CHECK p k", "-ERR unknown policy 'p'"},
		[2]string{"RL.ALLOW a 5 0.001", "[:1 :3 :0 :*"}, // reset_after counts down from 2000000 ms across batches
		[2]string{"RL.POLICY LIST", "-" + command.ErrNoPolicies},
	)
}

// BenchmarkPipelineCheck drives RL.CHECK with two ALLOW tiers through a
// real server over loopback (4 shards), the tiers' keys on one shard
// (same) or two (cross), next to RL.ALLOW on one key. ns/cmd is per
// command, server and client together.
func BenchmarkPipelineCheck(b *testing.B) {
	keyOn := func(prefix string, shard int, next *int) string {
		for {
			k := fmt.Sprintf("%s:%d", prefix, *next)
			*next++
			if engine.ShardOf([]byte(k), 4) == shard {
				return k
			}
		}
	}
	for _, mode := range []string{"allow", "same", "cross"} {
		b.Run(mode, func(b *testing.B) {
			addr, _, store := startPolicyServer(b, Config{})
			p, _ := policy.Parse([]string{"p", "ALLOW", "1000000000", "1000000"})
			store.Set(p)
			next := 0
			lines := 25
			if mode == "allow" {
				lines = 5
			}
			benchPipelineAt(b, addr, 16, 32, lines, func(i int) string {
				switch mode {
				case "allow":
					return encode("RL.ALLOW", fmt.Sprintf("key:%d", i), "1000000000", "1000000")
				case "same":
					return encode("RL.CHECK", "p", keyOn("a", i%4, &next), "p", keyOn("b", i%4, &next))
				}
				return encode("RL.CHECK", "p", keyOn("a", i%4, &next), "p", keyOn("b", (i+1)%4, &next))
			})
		})
	}
}
