package command

import "testing"

// TestMovableKeysBadNumkeys pins a bug: a movable-keys data command whose
// numkeys finds no keys (SINTERCARD 2 onekey) gave step 0, and the edge's
// loops over its key positions (key length, routing, ACL) never ended.
func TestMovableKeysBadNumkeys(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		first int
		last  int
	}{
		{[]string{"sintercard", "2", "a"}, 0, -1},
		{[]string{"sintercard", "x", "a"}, 0, -1},
		{[]string{"sintercard", "0", "a"}, 0, -1},
		{[]string{"sintercard", "2", "a", "b"}, 2, 3},
		{[]string{"lmpop", "1", "a", "LEFT"}, 2, 2},
		{[]string{"zmpop", "3", "a", "MIN"}, 0, -1},
	} {
		args := make([][]byte, len(tc.args))
		for i, a := range tc.args {
			args[i] = []byte(a)
		}
		first, last, step := Lookup(args[0]).Keys(args)
		if first != tc.first || last != tc.last || step < 1 {
			t.Errorf("%q: keys (%d, %d, %d), want (%d, %d, >=1)", tc.args, first, last, step, tc.first, tc.last)
		}
		n := 0
		for i := first; i <= last && i < len(args); i += step {
			if n++; n > len(args) {
				t.Fatalf("%q: the key loop does not end", tc.args)
			}
		}
	}
}
