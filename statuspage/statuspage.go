// Package statuspage serves rlserver's status page on the metrics address:
// live allowed/denied rates over the last minutes drawn as a chart, the
// keys denied most, in a cluster the members, the leader and their
// applied indexes, and on a sharded node (--groups) every data group, the
// Redis Cluster node list and the slot moves. The page is plain HTML, JavaScript and SVG embedded in
// the binary (no external assets); it polls /api/status, a JSON document
// the package builds from the server's counters.
package statuspage

import (
	"bufio"
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rlserver/rlserver/status"
)

//go:embed assets
var assets embed.FS

// Source is what the page shows. Server is required.
type Source struct {
	Server  Server
	Cluster Cluster // the Raft node in cluster mode; nil standalone
	Groups  Groups  // a sharded node's data groups; nil standalone and in a one-group cluster
	Version string
	// Password authenticates the ROLE the page sends to the other members
	// for their applied indexes (empty: none).
	Password string
}

// Server is what the page reads from the command layer (*server.Server).
type Server interface {
	Counters() status.Counters
	ConnectedClients() int
	// Started is when the server was made.
	Started() time.Time
	// TopDenied returns the n keys denied most in the recent past.
	TopDenied(n int) []status.TopKey
}

// Cluster is what the page reads from a Raft node (*cluster.Node).
type Cluster interface {
	ClusterStatus() status.Cluster
}

// Groups is what the page reads from a sharded node (*groups.Host).
type Groups interface {
	Topology() status.Topology
}

// Step is the time between two points of the rate series; History is how
// many points are kept (ten minutes).
const (
	Step    = time.Second
	History = 600
)

// Page is the status page and its rate sampler.
type Page struct {
	src Source

	mu      sync.Mutex
	last    sample // the totals at the previous tick
	points  []point
	members map[string]memberView // by node id: what ROLE said, cached
	asked   time.Time
}

type sample struct {
	at              time.Time
	allowed, denied int64
}

type point struct {
	T       int64   `json:"t"` // Unix ms at the end of the step
	Allowed float64 `json:"allowed"`
	Denied  float64 `json:"denied"`
}

// New returns the page of src. Call Run to sample rates.
func New(src Source) *Page {
	p := &Page{src: src}
	p.last = p.read(time.Now())
	return p
}

func (p *Page) read(now time.Time) sample {
	n := p.src.Server.Counters()
	return sample{at: now, allowed: n.Allowed, denied: n.Denied}
}

// Run samples the allowed and denied rates every Step until ctx ends.
func (p *Page) Run(ctx context.Context) {
	t := time.NewTicker(Step)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			p.tick(now)
		}
	}
}

func (p *Page) tick(now time.Time) {
	cur := p.read(now)
	p.mu.Lock()
	defer p.mu.Unlock()
	secs := cur.at.Sub(p.last.at).Seconds()
	if secs <= 0 {
		return
	}
	p.points = append(p.points, point{
		T:       cur.at.UnixMilli(),
		Allowed: float64(cur.allowed-p.last.allowed) / secs,
		Denied:  float64(cur.denied-p.last.denied) / secs,
	})
	if len(p.points) > History {
		p.points = append(p.points[:0], p.points[len(p.points)-History:]...)
	}
	p.last = cur
}

// Handler serves the page at /, its script at /app.js and the data at
// /api/status.
func (p *Page) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	files := http.FileServer(http.FS(static))
	mux.Handle("GET /{$}", files)
	mux.Handle("GET /app.js", files)
	mux.Handle("GET /style.css", files)
	mux.HandleFunc("GET /api/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(p.Status(r.Context()))
	})
	return mux
}

// Status is the /api/status document.
type Status struct {
	Version       string     `json:"version"`
	NowMs         int64      `json:"now_ms"`
	UptimeSeconds int64      `json:"uptime_seconds"`
	Totals        Totals     `json:"totals"`
	StepSeconds   float64    `json:"step_seconds"`
	Series        []point    `json:"series"`
	Top           []TopKey   `json:"top"`
	Cluster       *ClusterUI `json:"cluster"`
	Sharded       *ShardedUI `json:"sharded"` // null unless the node is sharded
}

// Totals are counters since start.
type Totals struct {
	Allowed  int64 `json:"allowed"`
	Denied   int64 `json:"denied"`
	Commands int64 `json:"commands"`
	Errors   int64 `json:"errors"`
	Clients  int   `json:"clients"`
}

// TopKey is one of the keys denied most.
type TopKey struct {
	Key    string  `json:"key"`
	Denied float64 `json:"denied"`
}

// ClusterUI is the cluster as this node sees it.
type ClusterUI struct {
	NodeID        string       `json:"node_id"`
	Role          string       `json:"role"`
	LeaderID      string       `json:"leader_id"`
	Term          uint64       `json:"term"`
	CommitIndex   uint64       `json:"commit_index"`
	AppliedIndex  uint64       `json:"applied_index"`
	LeaderChanges uint64       `json:"leader_changes"`
	Members       []memberView `json:"members"`
}

// ShardedUI is a sharded node's view of the slot directory: its data
// groups, the processes of the cluster and the slot moves.
type ShardedUI struct {
	Epoch         uint64    `json:"epoch"`
	SlotsAssigned int       `json:"slots_assigned"` // of 16384
	Groups        []GroupUI `json:"groups"`
	Nodes         []NodeUI  `json:"nodes"`
	// Moves are the moves the directory lists (the one in progress, if
	// any, and the last finished ones), newest (highest id) first.
	Moves []MoveUI `json:"moves"`
	// Rebalancing: a rebalance started on this node runs.
	Rebalancing bool `json:"rebalancing"`
}

// MoveUI is one slot move.
type MoveUI struct {
	ID    uint64 `json:"id"`
	Slots string `json:"slots"` // "0-99", or "7" for a single slot
	From  uint32 `json:"from"`  // source group
	To    uint32 `json:"to"`    // target group
	State string `json:"state"` // "begun", "committed" (the target owns the slots), "released" (over)
	// Keys: records the target imported so far, as this node's replica of
	// the target counts them (0 on a node that does not host it).
	Keys    int   `json:"keys"`
	BeganMs int64 `json:"began_ms"` // unix ms, the meta group's log time
	EndedMs int64 `json:"ended_ms"` // unix ms; 0 while in progress
	// DurationMs is from begin to release; null while in progress (the
	// page counts from began_ms to now_ms).
	DurationMs *int64 `json:"duration_ms"`
}

// GroupUI is one data group as this node sees it.
type GroupUI struct {
	ID     uint32   `json:"id"`
	Leader string   `json:"leader"` // node name; "" while none is known
	Role   string   `json:"role"`   // this node's role in the group; "" when it does not host it
	Slots  int      `json:"slots"`
	Ranges []string `json:"ranges"` // "0-5460", or "12000" for a single slot
	Keys   int      `json:"keys"`
	// Applied, Commit and Lag are this node's replica's (Lag: log entries
	// stored here and not yet applied).
	Applied uint64   `json:"applied_index"`
	Commit  uint64   `json:"commit_index"`
	Lag     uint64   `json:"lag"`
	Members []string `json:"members"`
	// Replicas are the nodes the directory places the group's voters on
	// and Learner the node being added ("" for none); with --replicas
	// only (empty without: every node holds every group).
	Replicas []string `json:"replicas"`
	Learner  string   `json:"learner"`
}

// NodeUI is one process of the cluster, as CLUSTER NODES lists it.
type NodeUI struct {
	ID       string   `json:"id"`   // 40-hex cluster id
	Name     string   `json:"name"` // the --node-id
	Addr     string   `json:"addr"` // client address; "" until registered
	RaftAddr string   `json:"raft_addr"`
	Self     bool     `json:"self"`
	Leads    []uint32 `json:"leads"` // the data groups it leads, as this node knows
	// Replicas counts the groups placed on the node and State is "live",
	// "dead" or "draining"; with --replicas only (0 and "" without).
	Replicas int    `json:"replicas"`
	State    string `json:"state"`
}

type memberView struct {
	ID       string  `json:"id"`
	RaftAddr string  `json:"raft_addr"`
	RESPAddr string  `json:"resp_addr"`
	Voter    bool    `json:"voter"`
	Leader   bool    `json:"leader"`
	Self     bool    `json:"self"`
	Role     string  `json:"role"`          // as the member itself said ("" when unreachable)
	Applied  *uint64 `json:"applied_index"` // nil when unreachable
}

// Status builds the page's data.
func (p *Page) Status(ctx context.Context) Status {
	s := p.src.Server
	n := s.Counters()
	st := Status{
		Version:       p.src.Version,
		NowMs:         time.Now().UnixMilli(),
		UptimeSeconds: int64(time.Since(s.Started()) / time.Second),
		Totals: Totals{
			Allowed:  n.Allowed,
			Denied:   n.Denied,
			Commands: n.CommandsProcessed,
			Errors:   n.ErrorReplies,
			Clients:  s.ConnectedClients(),
		},
		StepSeconds: Step.Seconds(),
		Top:         []TopKey{},
	}
	p.mu.Lock()
	st.Series = append([]point{}, p.points...)
	p.mu.Unlock()
	for _, k := range s.TopDenied(status.DefaultTopCount) {
		st.Top = append(st.Top, TopKey{Key: k.Key, Denied: k.Denied})
	}
	if cl := p.src.Cluster; cl != nil {
		st.Cluster = p.cluster(ctx, cl.ClusterStatus())
	}
	if g := p.src.Groups; g != nil {
		st.Sharded = sharded(g.Topology())
	}
	return st
}

// sharded describes t's groups and nodes; every slice is non-nil, so the
// JSON has [] rather than null.
func sharded(t status.Topology) *ShardedUI {
	ui := &ShardedUI{Epoch: t.Epoch, Groups: []GroupUI{}, Nodes: []NodeUI{}, Moves: []MoveUI{}, Rebalancing: t.Rebalancing}
	for _, r := range t.Ranges {
		ui.SlotsAssigned += r.End - r.Start + 1
	}
	leads := map[string][]uint32{}
	for _, g := range t.Groups {
		gu := GroupUI{ID: g.ID, Leader: g.Leader, Role: g.Role, Slots: g.Slots, Ranges: []string{}, Keys: g.Keys,
			Applied: g.Applied, Commit: g.Commit, Lag: g.Lag, Members: append([]string{}, g.Members...),
			Replicas: append([]string{}, g.Replicas...), Learner: g.Learner}
		for _, r := range g.Ranges {
			gu.Ranges = append(gu.Ranges, slotRange(r))
		}
		if g.Leader != "" {
			leads[g.Leader] = append(leads[g.Leader], g.ID)
		}
		ui.Groups = append(ui.Groups, gu)
	}
	for _, n := range t.Nodes {
		nu := NodeUI{ID: n.ID, Name: n.Name, Addr: n.Addr, RaftAddr: n.RaftAddr, Self: n.Myself,
			Leads: append([]uint32{}, leads[n.Name]...)}
		if n.Placed {
			nu.Replicas, nu.State = n.Replicas, "live"
			switch {
			case n.Dead:
				nu.State = "dead"
			case n.Draining:
				nu.State = "draining"
			}
		}
		ui.Nodes = append(ui.Nodes, nu)
	}
	for _, m := range t.Moves {
		mu := MoveUI{ID: m.ID, Slots: slotRange(status.SlotRange{Start: m.Start, End: m.End}), From: m.Source, To: m.Target,
			State: m.State, Keys: m.Keys, BeganMs: m.Began / 1e6, EndedMs: m.Ended / 1e6}
		if m.State == "released" && m.Ended > 0 {
			d := max(m.Ended-m.Began, 0) / 1e6
			mu.DurationMs = &d
		}
		ui.Moves = append(ui.Moves, mu)
	}
	slices.SortFunc(ui.Moves, func(a, b MoveUI) int { return cmp.Compare(b.ID, a.ID) })
	return ui
}

// slotRange writes r as CLUSTER NODES does: "start-end", or one number
// for a single slot.
func slotRange(r status.SlotRange) string {
	if r.Start == r.End {
		return strconv.Itoa(r.Start)
	}
	return strconv.Itoa(r.Start) + "-" + strconv.Itoa(r.End)
}

// cluster describes the members; each other member's applied index comes
// from its ROLE reply, asked at most once a second.
func (p *Page) cluster(ctx context.Context, cs status.Cluster) *ClusterUI {
	ui := &ClusterUI{NodeID: cs.NodeID, Role: cs.Role, LeaderID: cs.LeaderID, Term: cs.Term,
		CommitIndex: cs.CommitIndex, AppliedIndex: cs.AppliedIndex, LeaderChanges: cs.LeaderChanges, Members: []memberView{}}
	p.mu.Lock()
	fresh := time.Since(p.asked) < time.Second
	cached := p.members
	p.mu.Unlock()
	// A follower learns the client addresses of the leader, not always of
	// the other followers: the leader knows them all (RL.CLUSTER NODES).
	if !fresh {
		p.fillAddrs(ctx, &cs)
	}
	// Each goroutine writes its own element: no lock needed.
	views := make([]memberView, len(cs.Nodes))
	var wg sync.WaitGroup
	for i, n := range cs.Nodes {
		views[i] = memberView{ID: n.ID, RaftAddr: n.RaftAddr, RESPAddr: n.RESPAddr, Voter: n.Voter,
			Leader: n.ID == cs.LeaderID, Self: n.ID == cs.NodeID}
		m := &views[i]
		switch {
		case m.Self:
			applied := cs.AppliedIndex
			m.Applied, m.Role = &applied, cs.Role
		case fresh:
			if c, ok := cached[n.ID]; ok {
				m.Applied, m.Role = c.Applied, c.Role
			}
		default:
			wg.Add(1)
			go func() {
				defer wg.Done()
				if role, applied, err := askRole(ctx, n.RESPAddr, p.src.Password); err == nil {
					m.Role, m.Applied = role, &applied
				}
			}()
		}
	}
	wg.Wait()
	if !fresh {
		byID := make(map[string]memberView, len(views))
		for _, v := range views {
			byID[v.ID] = v
		}
		p.mu.Lock()
		p.members, p.asked = byID, time.Now()
		p.mu.Unlock()
	}
	ui.Members = views
	return ui
}

// fillAddrs sets the client addresses cs lacks from the leader's
// RL.CLUSTER NODES.
func (p *Page) fillAddrs(ctx context.Context, cs *status.Cluster) {
	leaderAddr := ""
	missing := false
	for _, n := range cs.Nodes {
		missing = missing || n.RESPAddr == ""
		if n.ID == cs.LeaderID {
			leaderAddr = n.RESPAddr
		}
	}
	if !missing || leaderAddr == "" || cs.LeaderID == cs.NodeID {
		return
	}
	v, err := ask(ctx, leaderAddr, p.src.Password, "RL.CLUSTER", "NODES")
	text, ok := v.(string)
	if err != nil || !ok {
		return
	}
	addrs := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		// id raft_addr resp_addr flags
		if f := strings.Fields(line); len(f) >= 3 && f[2] != "-" {
			addrs[f[0]] = f[2]
		}
	}
	for i := range cs.Nodes {
		if cs.Nodes[i].RESPAddr == "" {
			cs.Nodes[i].RESPAddr = addrs[cs.Nodes[i].ID]
		}
	}
}

// ask sends one command to a member (after AUTH when password is set) and
// returns its reply.
func ask(ctx context.Context, addr, password string, args ...string) (any, error) {
	if addr == "" {
		return nil, fmt.Errorf("no client address known")
	}
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	req := encode(args...)
	if password != "" {
		req = encode("AUTH", password) + req
	}
	if _, err := c.Write([]byte(req)); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	if password != "" {
		if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
			return nil, fmt.Errorf("AUTH refused")
		}
	}
	return readReply(r, 0)
}

func encode(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// askRole sends ROLE to a member and returns its role (leader or follower)
// and applied index (ROLE's replication offset, which rlserver reports as
// the Raft applied index).
func askRole(ctx context.Context, addr, password string) (string, uint64, error) {
	v, err := ask(ctx, addr, password, "ROLE")
	if err != nil {
		return "", 0, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) < 2 {
		return "", 0, fmt.Errorf("unexpected ROLE reply")
	}
	switch arr[0] {
	case "master":
		n, _ := arr[1].(int64)
		return "leader", uint64(n), nil
	case "slave":
		if len(arr) == 5 {
			n, _ := arr[4].(int64)
			return "follower", uint64(n), nil
		}
	}
	return "", 0, fmt.Errorf("unexpected ROLE reply")
}

// readReply reads the RESP2 subset ROLE uses: arrays, bulk and simple
// strings, integers.
func readReply(r *bufio.Reader, depth int) (any, error) {
	if depth > 4 {
		return nil, fmt.Errorf("reply nested too deep")
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return nil, fmt.Errorf("empty reply line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, fmt.Errorf("%s", body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 || n > 1<<16 {
			return nil, fmt.Errorf("bad bulk length")
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 || n > 1024 {
			return nil, fmt.Errorf("bad array length")
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readReply(r, depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected reply type %q", line[0])
}
