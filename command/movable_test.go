package command

import (
	"slices"
	"testing"
)

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

// TestKeyPositionsLeadKey: a destination before numkeys (ZUNIONSTORE's)
// is among a command's key positions, even when numkeys finds no key.
func TestKeyPositionsLeadKey(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []int
	}{
		{[]string{"zunionstore", "d", "2", "a", "b", "WEIGHTS", "1", "2"}, []int{1, 3, 4}},
		{[]string{"zdiffstore", "d", "3", "a"}, []int{1}},
		{[]string{"zinter", "2", "a", "b"}, []int{2, 3}},
		{[]string{"zintercard", "0", "a"}, nil},
		{[]string{"zrangestore", "d", "s", "0", "-1"}, []int{1, 2}},
		{[]string{"sinterstore", "d", "a", "b"}, []int{1, 2, 3}},
	} {
		args := make([][]byte, len(tc.args))
		for i, a := range tc.args {
			args[i] = []byte(a)
		}
		var got []int
		for i := range Lookup(args[0]).KeyPositions(args) {
			got = append(got, i)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: key positions %v, want %v", tc.args, got, tc.want)
		}
	}
}
