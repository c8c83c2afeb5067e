package statuspage

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/status"
)

// fakeServer stands in for the command layer.
type fakeServer struct {
	n       status.Counters
	clients int
	started time.Time
	top     []status.TopKey
}

func (f *fakeServer) Counters() status.Counters { return f.n }
func (f *fakeServer) ConnectedClients() int     { return f.clients }
func (f *fakeServer) Started() time.Time        { return f.started }
func (f *fakeServer) TopDenied(n int) []status.TopKey {
	return f.top[:min(n, len(f.top))]
}

type fakeCluster struct{ st status.Cluster }

func (f fakeCluster) ClusterStatus() status.Cluster { return f.st }

func TestRatesSeries(t *testing.T) {
	srv := &fakeServer{started: time.Now()}
	p := New(Source{Server: srv, Version: "v"})
	t0 := p.last.at
	srv.n.Allowed += 30
	srv.n.Denied += 10
	p.tick(t0.Add(2 * time.Second))
	srv.n.Denied += 5
	p.tick(t0.Add(3 * time.Second))
	st := p.Status(context.Background())
	if len(st.Series) != 2 || st.Series[0].Allowed != 15 || st.Series[0].Denied != 5 ||
		st.Series[1].Allowed != 0 || st.Series[1].Denied != 5 {
		t.Errorf("series %+v", st.Series)
	}
	if st.Totals.Allowed != 30 || st.Totals.Denied != 15 || st.Cluster != nil || st.Version != "v" {
		t.Errorf("status %+v", st)
	}
	for i := range History + 10 {
		p.tick(t0.Add(time.Duration(4+i) * time.Second))
	}
	if n := len(p.Status(context.Background()).Series); n != History {
		t.Errorf("%d points kept, want %d", n, History)
	}
}

// TestStatusDocument checks /api/status's JSON against fakes: totals,
// the top keys (at most status.DefaultTopCount, without their error
// bound), uptime, and a cluster whose other members cannot be reached.
func TestStatusDocument(t *testing.T) {
	srv := &fakeServer{
		n:       status.Counters{Allowed: 7, Denied: 3, CommandsProcessed: 12, ErrorReplies: 2},
		clients: 4,
		started: time.Now().Add(-90 * time.Second),
	}
	for i := range status.DefaultTopCount + 5 {
		srv.top = append(srv.top, status.TopKey{Key: fmt.Sprintf("k%02d", i), Denied: float64(100 - i), Error: 1})
	}
	cl := fakeCluster{status.Cluster{NodeID: "a", Role: "leader", LeaderID: "a", Term: 3, CommitIndex: 9, AppliedIndex: 8,
		LeaderChanges: 1, Nodes: []status.Node{{ID: "a", RaftAddr: "ra", RESPAddr: "", Voter: true}, {ID: "b", RaftAddr: "rb", Voter: false}}}}
	p := New(Source{Server: srv, Cluster: cl, Version: "v1"})
	rec := httptest.NewRecorder()
	p.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/status", nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	totals, _ := json.Marshal(doc["totals"])
	if string(totals) != `{"allowed":7,"clients":4,"commands":12,"denied":3,"errors":2}` {
		t.Errorf("totals %s", totals)
	}
	if up := doc["uptime_seconds"].(float64); up < 90 || up > 100 {
		t.Errorf("uptime %v", up)
	}
	top := doc["top"].([]any)
	if len(top) != status.DefaultTopCount {
		t.Fatalf("%d top keys, want %d", len(top), status.DefaultTopCount)
	}
	if first, _ := json.Marshal(top[0]); string(first) != `{"denied":100,"key":"k00"}` {
		t.Errorf("top[0] %s", first)
	}
	c, _ := json.Marshal(doc["cluster"])
	want := `{"applied_index":8,"commit_index":9,"leader_changes":1,"leader_id":"a",` +
		`"members":[{"applied_index":8,"id":"a","leader":true,"raft_addr":"ra","resp_addr":"","role":"leader","self":true,"voter":true},` +
		`{"applied_index":null,"id":"b","leader":false,"raft_addr":"rb","resp_addr":"","role":"","self":false,"voter":false}],` +
		`"node_id":"a","role":"leader","term":3}`
	if string(c) != want {
		t.Errorf("cluster\n got %s\nwant %s", c, want)
	}
}

// TestAskRole reads a leader's and a follower's ROLE replies from a fake
// member, with AUTH first.
func TestAskRole(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	replies := []string{
		"+OK\r\n*3\r\n$6\r\nmaster\r\n:42\r\n*1\r\n*3\r\n$9\r\n127.0.0.1\r\n$4\r\n7001\r\n$1\r\n0\r\n",
		"+OK\r\n*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:7000\r\n$9\r\nconnected\r\n:41\r\n",
	}
	go func() {
		for _, r := range replies {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(c)
			for range 2 { // AUTH and ROLE, each a 2- or 1-element array
				line, _ := br.ReadString('\n')
				n := int(line[1] - '0')
				for range 2 * n {
					br.ReadString('\n')
				}
			}
			c.Write([]byte(r))
			c.Close()
		}
	}()
	for _, want := range []struct {
		role    string
		applied uint64
	}{{"leader", 42}, {"follower", 41}} {
		role, applied, err := askRole(context.Background(), ln.Addr().String(), "pw")
		if err != nil || role != want.role || applied != want.applied {
			t.Errorf("askRole = %q %d %v, want %q %d", role, applied, err, want.role, want.applied)
		}
	}
	if _, _, err := askRole(context.Background(), "", ""); err == nil || !strings.Contains(err.Error(), "no client address") {
		t.Errorf("askRole without an address: %v", err)
	}
}

type fakeGroups struct{ t status.Topology }

func (f fakeGroups) Topology() status.Topology { return f.t }

// TestShardedDocument checks /api/status's "sharded" part against a fake
// topology: every group with its leader, this node's role, its slot ranges
// as text, keys and indexes; the nodes with their client addresses and the
// groups they lead. A node that is not sharded has "sharded": null.
func TestShardedDocument(t *testing.T) {
	srv := &fakeServer{started: time.Now()}
	cl := fakeCluster{status.Cluster{NodeID: "n1", Role: "leader", LeaderID: "n1", Nodes: []status.Node{{ID: "n1", RaftAddr: "r1", Voter: true}}}}
	r1 := status.SlotRange{Start: 0, End: 5460, Group: 1}
	r2 := status.SlotRange{Start: 5461, End: 10922, Group: 2}
	r3 := status.SlotRange{Start: 16383, End: 16383, Group: 1}
	topo := status.Topology{
		MyID:   "aaaa",
		Epoch:  5,
		Ranges: []status.SlotRange{r1, r2, r3},
		Nodes: []status.TopologyNode{
			{ID: "aaaa", Name: "n1", Addr: "127.0.0.1:7001", RaftAddr: "r1", Myself: true},
			{ID: "bbbb", Name: "n2", RaftAddr: "r2", PlacedNode: status.PlacedNode{Placed: true, Replicas: 2, Dead: true}},
		},
		Groups: []status.Group{
			{ID: 1, Leader: "n1", Role: "leader", Slots: 5462, Ranges: []status.SlotRange{r1, r3}, Applied: 40, Commit: 42, LastLog: 43,
				Lag: 3, Keys: 12, Members: []string{"n1", "n2"}, Replicas: []string{"n1", "n2", "n3"}, Learner: "n4"},
			{ID: 2, Leader: "", Role: "candidate", Slots: 5462, Ranges: []status.SlotRange{r2}, Applied: 7, Commit: 7, LastLog: 7,
				Members: []string{"n1", "n2"}},
			{ID: 3},
		},
	}
	p := New(Source{Server: srv, Cluster: cl, Groups: fakeGroups{topo}, Version: "v1"})
	rec := httptest.NewRecorder()
	p.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/status", nil))
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(doc["sharded"])
	want := `{"epoch":5,"groups":[` +
		`{"applied_index":40,"commit_index":42,"id":1,"keys":12,"lag":3,"leader":"n1","learner":"n4","members":["n1","n2"],"ranges":["0-5460","16383"],"replicas":["n1","n2","n3"],"role":"leader","slots":5462},` +
		`{"applied_index":7,"commit_index":7,"id":2,"keys":0,"lag":0,"leader":"","learner":"","members":["n1","n2"],"ranges":["5461-10922"],"replicas":[],"role":"candidate","slots":5462},` +
		`{"applied_index":0,"commit_index":0,"id":3,"keys":0,"lag":0,"leader":"","learner":"","members":[],"ranges":[],"replicas":[],"role":"","slots":0}],` +
		`"moves":[],"nodes":[{"addr":"127.0.0.1:7001","id":"aaaa","leads":[1],"name":"n1","raft_addr":"r1","replicas":0,"self":true,"state":""},` +
		`{"addr":"","id":"bbbb","leads":[],"name":"n2","raft_addr":"r2","replicas":2,"self":false,"state":"dead"}],` +
		`"rebalancing":false,"slots_assigned":10924}`
	if string(got) != want {
		t.Errorf("sharded\n got %s\nwant %s", got, want)
	}
	if doc["cluster"] == nil {
		t.Errorf("the meta group's cluster view is missing")
	}

	for _, src := range []Source{{Server: srv}, {Server: srv, Cluster: cl}} {
		st := New(src).Status(context.Background())
		if st.Sharded != nil {
			t.Errorf("not sharded (cluster %v): sharded %+v", src.Cluster != nil, st.Sharded)
		}
		rec := httptest.NewRecorder()
		New(src).Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/status", nil))
		if !strings.Contains(rec.Body.String(), `"sharded":null`) {
			t.Errorf("not sharded (cluster %v): %s", src.Cluster != nil, rec.Body.String())
		}
	}
}

// TestPageHasGroupTables: the page and its script carry the elements the
// sharded view fills, and the script draws them from the JSON's names.
func TestPageHasGroupTables(t *testing.T) {
	p := New(Source{Server: &fakeServer{started: time.Now()}})
	for path, wants := range map[string][]string{
		"/": {`id="groups-section" hidden`, `id="groups"`, `id="nodes"`, `id="groups-summary"`,
			"<h2>Slot moves</h2>", `id="moves"`, `id="moves-summary"`, "<th>keys imported</th>", "<th>duration</th>"},
		"/app.js": {"drawGroups(s.sharded, s.now_ms)", "gr.applied_index", "gr.commit_index", "gr.lag", "gr.ranges", "n.addr", "g.slots_assigned",
			"drawMoves(g.moves, g.rebalancing, nowMs)", "m.id", "m.slots", "m.from", "m.to", "m.state", "m.keys",
			"m.duration_ms", "m.began_ms", `"rebalancing"`},
		"/style.css": {"tr.move.in-progress", "#moves-summary.rebalancing"},
	} {
		rec := httptest.NewRecorder()
		p.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		for _, w := range wants {
			if !strings.Contains(rec.Body.String(), w) {
				t.Errorf("%s lacks %q", path, w)
			}
		}
	}
}

// TestShardedMoves checks /api/status's "sharded.moves" and
// "sharded.rebalancing" against a fake topology: every move the directory
// lists, newest first whatever the topology's order, its slots as text,
// groups, state, keys imported, times in ms and the duration of finished
// moves (null for the one in progress).
func TestShardedMoves(t *testing.T) {
	topo := status.Topology{
		Moves: []status.Move{
			{ID: 3, Start: 0, End: 99, Source: 1, Target: 2, State: "released", Keys: 40, Began: 1_000_000_000, Ended: 3_500_000_000},
			{ID: 5, Start: 200, End: 299, Source: 1, Target: 3, State: "committed", Keys: 52, Began: 6_000_000_000},
			{ID: 4, Start: 100, End: 100, Source: 2, Target: 1, State: "released", Keys: 1, Began: 4_000_000_000, Ended: 4_250_000_000},
		},
		Rebalancing: true,
	}
	p := New(Source{Server: &fakeServer{started: time.Now()}, Groups: fakeGroups{topo}})
	rec := httptest.NewRecorder()
	p.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/status", nil))
	var doc struct {
		Sharded map[string]json.RawMessage `json:"sharded"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	want := `[` +
		`{"id":5,"slots":"200-299","from":1,"to":3,"state":"committed","keys":52,"began_ms":6000,"ended_ms":0,"duration_ms":null},` +
		`{"id":4,"slots":"100","from":2,"to":1,"state":"released","keys":1,"began_ms":4000,"ended_ms":4250,"duration_ms":250},` +
		`{"id":3,"slots":"0-99","from":1,"to":2,"state":"released","keys":40,"began_ms":1000,"ended_ms":3500,"duration_ms":2500}]`
	if got := string(doc.Sharded["moves"]); got != want {
		t.Errorf("sharded.moves\n got %s\nwant %s", got, want)
	}
	if got := string(doc.Sharded["rebalancing"]); got != "true" {
		t.Errorf("sharded.rebalancing = %s, want true", got)
	}
	// The fake's topology is not reordered in place.
	if topo.Moves[0].ID != 3 || topo.Moves[1].ID != 5 {
		t.Errorf("the topology's moves were reordered: %+v", topo.Moves)
	}
}
