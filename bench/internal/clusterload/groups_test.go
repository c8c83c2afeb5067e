package clusterload

import (
	"slices"
	"testing"
)

func TestParseGroups(t *testing.T) {
	text := "1 leader=n1 role=leader slots=0-99,200 keys=7 applied=3 lag=0 replicas=n1,n2,n3 learner=n4\n" +
		"2 leader=- role=- slots=- keys=0 applied=0 lag=0\n"
	gs := ParseGroups(text)
	if len(gs) != 2 {
		t.Fatalf("%d groups, want 2: %+v", len(gs), gs)
	}
	g := gs[0]
	if g.ID != 1 || g.Leader != "n1" || g.Slots != "0-99,200" || g.Keys != 7 || !slices.Equal(g.Replicas, []string{"n1", "n2", "n3"}) || g.Learner != "n4" {
		t.Fatalf("group 1: %+v", g)
	}
	if gs[1].Learner != "-" || gs[1].Replicas != nil || CountSlots(gs[1].Slots) != 0 {
		t.Fatalf("group 2: %+v", gs[1])
	}
	if n := CountSlots(g.Slots); n != 101 {
		t.Fatalf("CountSlots(%q) = %d, want 101", g.Slots, n)
	}
}
