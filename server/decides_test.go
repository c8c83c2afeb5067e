package server

import (
	"slices"
	"testing"
)

// TestDecidingCommands pins which commands count as limiter decisions
// (status.Command.Decides): only they get allowed/denied series in the
// metrics; PING, DEL, EXISTS, RL.RESET had them, always 0.
func TestDecidingCommands(t *testing.T) {
	var got []string
	for _, c := range byID {
		if c.decides() {
			got = append(got, c.name)
		}
	}
	slices.Sort(got)
	want := []string{"cl.throttle", "gcra", "rl.allow", "rl.check", "rl.fixed", "rl.log", "rl.peek", "rl.shape", "rl.sliding"}
	if !slices.Equal(got, want) {
		t.Errorf("deciding commands %v, want %v", got, want)
	}
}
