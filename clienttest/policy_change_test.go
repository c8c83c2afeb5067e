package clienttest

import (
	"context"
	"testing"
)

// TestPolicyRaiseAdmitsAtOnce (issue 16): a key that exhausted a token
// bucket policy is admitted at once, by the difference, when RL.POLICY
// SET raises the policy's capacity (it used to keep the fraction in use
// and stay exhausted). At 0.001/s (one token per 1000 s) no token comes
// back during the test.
func TestPolicyRaiseAdmitsAtOnce(t *testing.T) {
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	// check is RL.CHECK's [allowed, remaining] for one tier.
	check := func(cost int, p, k string) (bool, int64) {
		t.Helper()
		v, err := c.Do(context.Background(), "RL.CHECK", "COST", cost, p, k).Slice()
		if err != nil {
			t.Fatal(err)
		}
		tier := v[2].([]any)
		return v[0].(int64) == 1, tier[4].(int64)
	}
	for _, c0 := range []struct {
		name, policy    string
		before, after   []any // RL.POLICY SET's arguments after the name
		capBefore, diff int
	}{
		{"ALLOW 2 -> 10", "a", []any{"ALLOW", 2, slowRate}, []any{"ALLOW", 10, slowRate}, 2, 8},
		{"THROTTLE burst 1 -> 9", "th", []any{"THROTTLE", 1, 1, 1000}, []any{"THROTTLE", 9, 1, 1000}, 2, 8},
	} {
		t.Run(c0.name, func(t *testing.T) {
			key := "k-" + c0.policy
			wantReply(t, c, "OK", append([]any{"RL.POLICY", "SET", c0.policy}, c0.before...)...)
			if ok, _ := check(c0.capBefore, c0.policy, key); !ok {
				t.Fatal("the first check was denied")
			}
			if ok, _ := check(1, c0.policy, key); ok {
				t.Fatal("an exhausted key was allowed")
			}
			wantReply(t, c, "OK", append([]any{"RL.POLICY", "SET", c0.policy}, c0.after...)...)
			if ok, r := check(0, c0.policy, key); !ok || r != int64(c0.diff) {
				t.Errorf("after the raise: allowed %v, remaining %d, want %d", ok, r, c0.diff)
			}
			if ok, r := check(c0.diff, c0.policy, key); !ok || r != 0 {
				t.Errorf("taking the difference at once: allowed %v, remaining %d", ok, r)
			}
			if ok, _ := check(1, c0.policy, key); ok {
				t.Error("allowed beyond the raised capacity")
			}
		})
	}
}
