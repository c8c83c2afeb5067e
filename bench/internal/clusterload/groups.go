package clusterload

import (
	"strconv"
	"strings"
)

// Group is one line of RL.CLUSTER GROUPS, as a node shows it.
type Group struct {
	ID       int
	Leader   string // "-" while none is known
	Slots    string // "0-99,200", or "-" for none
	Keys     int    // the answering node's replica's keys (0 without one)
	Replicas []string
	Learner  string // "-" for none (and without --replicas)
}

// ParseGroups reads RL.CLUSTER GROUPS's text.
func ParseGroups(text string) []Group {
	var out []Group
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		g := Group{Learner: "-"}
		g.ID, _ = strconv.Atoi(f[0])
		for _, kv := range f[1:] {
			k, val, _ := strings.Cut(kv, "=")
			switch k {
			case "leader":
				g.Leader = val
			case "keys":
				g.Keys, _ = strconv.Atoi(val)
			case "slots":
				g.Slots = val
			case "replicas":
				g.Replicas = strings.Split(val, ",")
			case "learner":
				g.Learner = val
			}
		}
		out = append(out, g)
	}
	return out
}

// CountSlots counts the slots of "0-99,200,300-310" ("-": none).
func CountSlots(s string) int {
	n := 0
	for _, r := range strings.Split(s, ",") {
		a, b, ok := strings.Cut(r, "-")
		x, err := strconv.Atoi(a)
		if err != nil {
			continue
		}
		y := x
		if ok {
			y, _ = strconv.Atoi(b)
		}
		n += y - x + 1
	}
	return n
}
