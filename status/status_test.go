package status

import "testing"

func TestLeader(t *testing.T) {
	c := Cluster{NodeID: "a", Nodes: []Node{{ID: "a"}, {ID: "b", RESPAddr: "b:6379"}}}
	if l := c.Leader(); l != nil {
		t.Errorf("no leader known: Leader() = %+v", l)
	}
	c.LeaderID = "b"
	if l := c.Leader(); l == nil || l.RESPAddr != "b:6379" {
		t.Errorf("Leader() = %+v, want b", l)
	}
	c.LeaderID = "gone"
	if l := c.Leader(); l != nil {
		t.Errorf("leader outside the configuration: Leader() = %+v", l)
	}
}

func TestLatencyBuckets(t *testing.T) {
	if len(LatencyBuckets) != NumLatencyBuckets || LatencyBuckets[0] != 1e-6 {
		t.Fatalf("buckets %v", LatencyBuckets)
	}
	for i := 1; i < len(LatencyBuckets); i++ {
		if LatencyBuckets[i] != 2*LatencyBuckets[i-1] {
			t.Errorf("bound %d = %v, want twice %v", i, LatencyBuckets[i], LatencyBuckets[i-1])
		}
	}
}
