package kv

import (
	"errors"
	"testing"
)

// effectsOutcome reads every shape of the effects' reply.
func TestEffectsOutcome(t *testing.T) {
	for _, tc := range []struct {
		reply   string
		want    error
		refused string
	}{
		{"*2\r\n+OK\r\n+OK\r\n", nil, ""},
		{"*0\r\n", nil, ""},
		{"*-1\r\n", ErrConflict, ""},
		{"_\r\n", ErrConflict, ""},
		{"*2\r\n+OK\r\n-OOM command not allowed when used memory > 'maxmemory'.\r\n", nil, "OOM command not allowed when used memory > 'maxmemory'."},
		{"-OOM no\r\n", nil, "OOM no"},
	} {
		err := effectsOutcome(tc.reply)
		var r *Refused
		switch {
		case tc.refused != "":
			if !errors.As(err, &r) || r.Text != tc.refused {
				t.Errorf("%q: %v, want refused %q", tc.reply, err, tc.refused)
			}
		case !errors.Is(err, tc.want) || (tc.want == nil && err != nil):
			t.Errorf("%q: %v, want %v", tc.reply, err, tc.want)
		}
	}
}
