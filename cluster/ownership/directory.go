package ownership

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/rlserver/rlserver/cluster/internal/codec"
	"github.com/rlserver/rlserver/slots"
)

// The slot directory: a sharded cluster's metadata, replicated by its meta
// group (group 0, which owns no keys). It holds which data groups exist,
// which group owns each of the 16,384 hash slots, and each node's client
// address; every node reads it from its own replica of the meta group and
// opens, routes and advertises from it. A change is a directory op (the
// *Op functions below), carried by one log entry of the meta group
// (entry.Meta) and applied by Directory.Apply; every change raises the
// epoch.

// Peer is one member of a Raft group: the nodes that bootstrap a group
// (Group.Peers), or a static cluster configuration (cluster.Peer).
type Peer struct {
	ID   string
	Addr string // Raft address, host:port
}

// Directory is one version of the slot directory. It is immutable once
// published: readers share it.
type Directory struct {
	Epoch  uint64            // 0: not initialised yet
	Groups []Group           // data groups, ascending by ID
	Slots  []uint32          // slots.Count entries: the owning group, 0 for none
	Nodes  map[string]string // node id -> client (RESP) address

	// Slot moves (table.go; driven by groups/mover.go): at most one in
	// progress, then the last finished ones, oldest first.
	Moves    []Move
	NextMove uint64 // the id the next move gets

	// Replicas is the replication factor R (placement.go): each group
	// has R voters, recorded in Group.Replicas. 0: a directory from
	// before placement, where every node holds every group.
	Replicas int
	// States are the nodes the meta group's leader found dead or an
	// operator asked to drain (NodeDead, NodeDraining; a node absent is
	// live and placed normally). Placement takes replicas off them.
	States map[string]byte
	// ReplicasAdded counts the replica moves finished: learners that
	// became voters.
	ReplicasAdded uint64
}

// Node states in Directory.States (bits).
const (
	// NodeDead: unreachable for longer than --node-dead-after.
	NodeDead byte = 1
	// NodeDraining: RL.CLUSTER REMOVE asked for the node to leave; its
	// replicas move to other nodes, then it leaves the cluster.
	NodeDraining byte = 2
)

// Placeable reports whether placement may put replicas on node.
func (d *Directory) Placeable(node string) bool { return d.States[node] == 0 }

// Move is one slot move as the directory records it.
type Move struct {
	ID             uint64
	Start, End     int // the slot range, inclusive
	Source, Target uint32
	State          byte  // MoveBegun, MoveCommitted, MoveReleased
	Began, Ended   int64 // entry times (ns) of the begin and of the release
}

// Move states in the directory.
const (
	// MoveBegun: the range still belongs to the source in the directory;
	// the driver imports it into the target.
	MoveBegun byte = 1
	// MoveCommitted: the target committed the import; the directory
	// points the range at the target; the source has not released it yet.
	MoveCommitted byte = 2
	// MoveReleased: the source dropped the range; the move is over.
	MoveReleased byte = 3
)

// keptMoves is how many finished moves the directory remembers.
const keptMoves = 16

// Current returns the move in progress, or nil.
func (d *Directory) Current() *Move {
	for i := range d.Moves {
		if d.Moves[i].State != MoveReleased {
			return &d.Moves[i]
		}
	}
	return nil
}

// Group is one data group of the directory.
type Group struct {
	ID uint32
	// Peers is the group's first configuration: the nodes that bootstrap
	// it. Nodes that join later are added by the group's leader.
	Peers []Peer
	// Replicas are the nodes that hold the group's voters (by node id,
	// sorted). Learner and Leaving are the change in flight, "" for none
	// (placement.go): Learner is being added (a non-voter while Replicas
	// lacks it), then Leaving, if any, leaves. All empty when
	// Directory.Replicas is 0.
	Replicas []string
	Learner  string
	Leaving  string // the replica the learner replaces, "" when it adds one
	// Leader is the node that last reported leading the group, in
	// LeaderTerm: where a node that does not hold the group sends its
	// clients (-MOVED) and what CLUSTER SLOTS shows.
	Leader     string
	LeaderTerm uint64
}

// Group returns the group's entry, or nil.
func (d *Directory) Group(id uint32) *Group {
	for i := range d.Groups {
		if d.Groups[i].ID == id {
			return &d.Groups[i]
		}
	}
	return nil
}

// Directory ops: an op byte and its operands. Append-only, like the log's
// entry types: logs and snapshots on disk hold them.
const (
	// opInit: uvarint n, then the peers (appendPeers). On an
	// uninitialised directory, creates groups 1..n with those peers and
	// splits the slots evenly over them in order; otherwise does nothing
	// (the first init wins).
	opInit byte = 1
	// opRegister: node id, client address.
	opRegister byte = 2
	// opForget: node id (a removed node).
	opForget byte = 3
	// opAddGroup: the peers (appendPeers). Adds a group with the next id
	// and no slots; the result is its id (0: not initialised).
	opAddGroup byte = 4
	// opMoveBegin: uvarint start, end, target. Records a move of the
	// range from its owner to the target; the result is its id. Refused
	// (ErrMoveInvalid) while another move is in progress, or when the
	// range is not owned whole by one group other than the target.
	opMoveBegin byte = 5
	// opMoveCommitted: uvarint id. Points the move's range at its target.
	opMoveCommitted byte = 6
	// opMoveReleased: uvarint id. Ends the move.
	opMoveReleased byte = 7
	// opInitPlaced: uvarint n, uvarint R, then the peers. As opInit, with
	// replication factor R: each group's replicas are Place's over the
	// peers.
	opInitPlaced byte = 8
	// opAddLearner: uvarint group, node id, the id of the replica it
	// replaces ("" for none). Records the change; refused (no change)
	// while another is in flight, or when the node holds a replica
	// already. This op and the three after it
	// result in 1 when they change the directory, 0 when not.
	opAddLearner byte = 9
	// opPromoted: uvarint group, node id. The group's learner became a
	// voter: it joins Replicas.
	opPromoted byte = 10
	// opDropReplica: uvarint group, node id. The node no longer holds a
	// replica of the group (or is no longer being added to it).
	opDropReplica byte = 11
	// opLeader: uvarint group, node id, uvarint term. The node leads the
	// group since term (ignored when an equal or later term is recorded
	// for another node).
	opLeader byte = 12
	// opNodeState: node id, state byte (NodeDead|NodeDraining bits; 0
	// for live). Results in 1 when it changes the directory. Ignored for
	// a node the directory does not know, and in a directory without
	// placement.
	opNodeState byte = 13
)

// NodeStateOp records node's state (NodeDead, NodeDraining bits).
func NodeStateOp(node string, state byte) []byte {
	return append(codec.AppendString([]byte{opNodeState}, node), state)
}

// InitPlacedOp creates groups 1..groups with replication factor r over
// peers, unless the directory is initialised already.
func InitPlacedOp(groups, r int, peers []Peer) []byte {
	op := binary.AppendUvarint([]byte{opInitPlaced}, uint64(groups))
	return appendPeers(binary.AppendUvarint(op, uint64(r)), peers)
}

// AddLearnerOp records node as being added to group g, to replace the
// replica on leaving ("" to add one).
func AddLearnerOp(g uint32, node, leaving string) []byte {
	return codec.AppendString(groupNodeOp(opAddLearner, g, node), leaving)
}

// PromotedOp records that group g's learner node became a voter.
func PromotedOp(g uint32, node string) []byte { return groupNodeOp(opPromoted, g, node) }

// DropReplicaOp records that node no longer holds (or is no longer
// receiving) a replica of group g.
func DropReplicaOp(g uint32, node string) []byte { return groupNodeOp(opDropReplica, g, node) }

// LeaderOp records that node leads group g since term.
func LeaderOp(g uint32, node string, term uint64) []byte {
	return binary.AppendUvarint(groupNodeOp(opLeader, g, node), term)
}

func groupNodeOp(code byte, g uint32, node string) []byte {
	return codec.AppendString(binary.AppendUvarint([]byte{code}, uint64(g)), node)
}

// InitOp creates groups 1..groups bootstrapped by peers, with the slots
// split evenly, unless the directory is initialised already.
func InitOp(groups int, peers []Peer) []byte {
	return appendPeers(binary.AppendUvarint([]byte{opInit}, uint64(groups)), peers)
}

// RegisterOp records a node's client address.
func RegisterOp(id, respAddr string) []byte {
	return codec.AppendString(codec.AppendString([]byte{opRegister}, id), respAddr)
}

// ForgetOp drops a node's record.
func ForgetOp(id string) []byte { return codec.AppendString([]byte{opForget}, id) }

// AddGroupOp adds a data group with no slots, bootstrapped by peers.
func AddGroupOp(peers []Peer) []byte { return appendPeers([]byte{opAddGroup}, peers) }

// MoveBeginOp records a move of slots [start, end] to group target.
func MoveBeginOp(start, end int, target uint32) []byte {
	op := binary.AppendUvarint([]byte{opMoveBegin}, uint64(start))
	op = binary.AppendUvarint(op, uint64(end))
	return binary.AppendUvarint(op, uint64(target))
}

// MoveCommittedOp points move id's range at its target.
func MoveCommittedOp(id uint64) []byte { return binary.AppendUvarint([]byte{opMoveCommitted}, id) }

// MoveReleasedOp ends move id.
func MoveReleasedOp(id uint64) []byte { return binary.AppendUvarint([]byte{opMoveReleased}, id) }

// ValidOp reports whether op decodes as a directory change.
func ValidOp(op []byte) bool {
	_, _, err := EmptyDirectory().Apply(op, 0)
	return !errors.Is(err, ErrBadChange)
}

// ErrBadChange reports a directory op that does not decode. Ops are
// checked before they reach the log (ValidOp), so applying one that
// does not decode halts the replica.
var ErrBadChange = errors.New("bad directory change")

func (d *Directory) clone() *Directory {
	c := &Directory{Epoch: d.Epoch, Groups: slices.Clone(d.Groups), Slots: slices.Clone(d.Slots), Nodes: make(map[string]string, len(d.Nodes)),
		Moves: slices.Clone(d.Moves), NextMove: d.NextMove, Replicas: d.Replicas, States: maps.Clone(d.States),
		ReplicasAdded: d.ReplicasAdded}
	for k, v := range d.Nodes {
		c.Nodes[k] = v
	}
	if c.States == nil {
		c.States = map[string]byte{}
	}
	if c.Slots == nil {
		c.Slots = make([]uint32, slots.Count)
	}
	return c
}

// EmptyDirectory returns a directory that is not initialised (epoch 0).
func EmptyDirectory() *Directory {
	return &Directory{Slots: make([]uint32, slots.Count), Nodes: map[string]string{}, States: map[string]byte{}}
}

// Apply returns the directory after op, and op's result; d is left as it
// is. now is the entry's time. An *ErrMoveInvalid is a refusal by the
// state (the directory returned is d); ErrBadChange, an op that does not
// decode.
func (d *Directory) Apply(op []byte, now int64) (*Directory, uint64, error) {
	dec := codec.Reader{B: op}
	code := dec.Byte()
	if dec.Err != nil {
		return nil, 0, ErrBadChange
	}
	switch code {
	case opInit:
		n := dec.Uvarint()
		peers := peers(&dec)
		if dec.Err != nil || len(dec.B) != 0 || n == 0 || n > 1024 || len(peers) == 0 {
			return nil, 0, ErrBadChange
		}
		if d.Epoch != 0 {
			return d, 0, nil
		}
		c := d.clone()
		for g := uint32(1); g <= uint32(n); g++ {
			c.Groups = append(c.Groups, Group{ID: g, Peers: peers})
		}
		for s := range slots.Count {
			c.Slots[s] = 1 + uint32(uint64(s)*n/slots.Count)
		}
		c.Epoch = 1
		return c, 0, nil
	case opInitPlaced:
		n, r := dec.Uvarint(), dec.Uvarint()
		peers := peers(&dec)
		if dec.Err != nil || len(dec.B) != 0 || n == 0 || n > 1024 || r == 0 || r > 16 || len(peers) == 0 {
			return nil, 0, ErrBadChange
		}
		if d.Epoch != 0 {
			return d, 0, nil
		}
		c := d.clone()
		c.Replicas = int(r)
		ids := make([]uint32, n)
		var nodes []string
		for _, p := range peers {
			nodes = append(nodes, p.ID)
		}
		for i := range ids {
			ids[i] = uint32(i + 1)
		}
		place := Place(ids, nil, nil, nodes, int(r))
		for _, g := range ids {
			c.Groups = append(c.Groups, Group{ID: g, Peers: placedPeers(peers, place[g]), Replicas: place[g]})
		}
		for s := range slots.Count {
			c.Slots[s] = 1 + uint32(uint64(s)*n/slots.Count)
		}
		c.Epoch = 1
		return c, 0, nil
	case opAddLearner, opPromoted, opDropReplica, opLeader:
		gid, node := dec.Uvarint(), string(dec.Bytes())
		var term uint64
		var leaving string
		switch code {
		case opLeader:
			term = dec.Uvarint()
		case opAddLearner:
			leaving = string(dec.Bytes())
		}
		if dec.Err != nil || len(dec.B) != 0 || node == "" || gid == 0 || gid > 1<<31 {
			return nil, 0, ErrBadChange
		}
		c := d.applyReplicaOp(code, uint32(gid), node, leaving, term)
		if c == d {
			return d, 0, nil
		}
		return c, 1, nil // 1: the op changed the directory
	case opNodeState:
		id, state := string(dec.Bytes()), dec.Byte()
		if dec.Err != nil || len(dec.B) != 0 || id == "" || state > NodeDead|NodeDraining {
			return nil, 0, ErrBadChange
		}
		if _, known := d.Nodes[id]; !known || d.Replicas == 0 || d.States[id] == state {
			return d, 0, nil
		}
		c := d.clone()
		if state == 0 {
			delete(c.States, id)
		} else {
			c.States[id] = state
		}
		c.Epoch++
		return c, 1, nil
	case opRegister:
		id, addr := string(dec.Bytes()), string(dec.Bytes())
		if dec.Err != nil || len(dec.B) != 0 || id == "" {
			return nil, 0, ErrBadChange
		}
		if d.Nodes[id] == addr {
			return d, 0, nil
		}
		c := d.clone()
		c.Nodes[id] = addr
		c.Epoch++
		return c, 0, nil
	case opForget:
		id := string(dec.Bytes())
		if dec.Err != nil || len(dec.B) != 0 {
			return nil, 0, ErrBadChange
		}
		if _, ok := d.Nodes[id]; !ok {
			return d, 0, nil
		}
		c := d.clone()
		delete(c.Nodes, id)
		delete(c.States, id)
		c.Epoch++
		return c, 0, nil
	case opAddGroup:
		peers := peers(&dec)
		if dec.Err != nil || len(dec.B) != 0 || len(peers) == 0 {
			return nil, 0, ErrBadChange
		}
		if d.Epoch == 0 || len(d.Groups) >= 1024 {
			return d, 0, nil
		}
		c := d.clone()
		g := uint32(1)
		if len(c.Groups) > 0 {
			g = c.Groups[len(c.Groups)-1].ID + 1
		}
		ng := Group{ID: g, Peers: peers}
		if c.Replicas > 0 {
			for _, p := range peers {
				ng.Replicas = append(ng.Replicas, p.ID)
			}
			slices.Sort(ng.Replicas)
		}
		c.Groups = append(c.Groups, ng)
		c.Epoch++
		return c, uint64(g), nil
	case opMoveBegin:
		start, end, target := dec.Uvarint(), dec.Uvarint(), dec.Uvarint()
		if dec.Err != nil || len(dec.B) != 0 || start > end || end >= slots.Count || target > 1<<31 {
			return nil, 0, ErrBadChange
		}
		if err := d.checkMove(int(start), int(end), uint32(target)); err != nil {
			return d, 0, err
		}
		c := d.clone()
		c.NextMove = max(c.NextMove, 1)
		c.Moves = append(c.Moves, Move{ID: c.NextMove, Start: int(start), End: int(end),
			Source: d.Slots[start], Target: uint32(target), State: MoveBegun, Began: now})
		c.NextMove++
		c.Epoch++
		return c, c.NextMove - 1, nil
	case opMoveCommitted, opMoveReleased:
		id := dec.Uvarint()
		if dec.Err != nil || len(dec.B) != 0 {
			return nil, 0, ErrBadChange
		}
		cur := d.Current()
		if cur == nil || cur.ID != id {
			return d, 0, nil // done already (or another move's): idempotent
		}
		want := MoveBegun
		if code == opMoveReleased {
			want = MoveCommitted
		}
		if cur.State != want {
			return d, 0, nil
		}
		c := d.clone()
		m := c.Current()
		if code == opMoveCommitted {
			for s := m.Start; s <= m.End; s++ {
				c.Slots[s] = m.Target
			}
			m.State = MoveCommitted
		} else {
			m.State, m.Ended = MoveReleased, now
			if len(c.Moves) > keptMoves {
				c.Moves = c.Moves[len(c.Moves)-keptMoves:]
			}
		}
		c.Epoch++
		return c, 0, nil
	}
	return nil, 0, ErrBadChange
}

// applyReplicaOp applies a placement op; d itself when it changes
// nothing.
func (d *Directory) applyReplicaOp(code byte, gid uint32, node, leaving string, term uint64) *Directory {
	g := d.Group(gid)
	if g == nil || d.Replicas == 0 {
		return d
	}
	switch code {
	case opAddLearner:
		if g.Learner != "" || slices.Contains(g.Replicas, node) || (leaving != "" && !slices.Contains(g.Replicas, leaving)) {
			return d
		}
	case opPromoted:
		if g.Learner != node || slices.Contains(g.Replicas, node) {
			return d
		}
	case opDropReplica:
		cancel := g.Learner == node && !slices.Contains(g.Replicas, node)
		if !cancel && (!slices.Contains(g.Replicas, node) || len(g.Replicas) == 1) {
			return d
		}
	case opLeader:
		if term < g.LeaderTerm || (term == g.LeaderTerm && g.Leader != "") {
			return d
		}
	}
	c := d.clone()
	cg := c.Group(gid)
	switch code {
	case opAddLearner:
		cg.Learner, cg.Leaving = node, leaving
	case opPromoted:
		c.ReplicasAdded++
		cg.Replicas = append(slices.Clone(cg.Replicas), node)
		slices.Sort(cg.Replicas)
		if cg.Leaving == "" {
			cg.Learner = "" // nothing leaves: the change is complete
		}
	case opDropReplica:
		if cg.Learner == node && !slices.Contains(cg.Replicas, node) {
			cg.Learner, cg.Leaving = "", "" // the change is cancelled
			break
		}
		cg.Replicas = slices.DeleteFunc(slices.Clone(cg.Replicas), func(n string) bool { return n == node })
		if node == cg.Leaving || node == cg.Learner {
			cg.Learner, cg.Leaving = "", "" // the change is complete (or its new voter left)
		}
		if cg.Leader == node {
			cg.Leader = ""
		}
	case opLeader:
		cg.Leader, cg.LeaderTerm = node, term
	}
	c.Epoch++
	return c
}

// placedPeers are the peers whose ids are in ids.
func placedPeers(peers []Peer, ids []string) []Peer {
	var out []Peer
	for _, p := range peers {
		if slices.Contains(ids, p.ID) {
			out = append(out, p)
		}
	}
	return out
}

// checkMove says why the directory refuses to move [start, end] to
// target, or nil.
func (d *Directory) checkMove(start, end int, target uint32) error {
	switch {
	case d.Epoch == 0:
		return &ErrMoveInvalid{"the slot directory is not initialised"}
	case d.Current() != nil:
		return &ErrMoveInvalid{fmt.Sprintf("move %d is in progress; one move at a time", d.Current().ID)}
	case d.Group(target) == nil:
		return &ErrMoveInvalid{fmt.Sprintf("no group %d", target)}
	}
	src := d.Slots[start]
	for s := start; s <= end; s++ {
		if d.Slots[s] != src {
			return &ErrMoveInvalid{fmt.Sprintf("slots %d-%d are not owned by one group (slot %d: group %d, slot %d: group %d)", start, end, start, src, s, d.Slots[s])}
		}
	}
	switch {
	case src == 0:
		return &ErrMoveInvalid{fmt.Sprintf("slots %d-%d are not assigned", start, end)}
	case src == target:
		return &ErrMoveInvalid{fmt.Sprintf("slots %d-%d are in group %d already", start, end, target)}
	}
	return nil
}

// AppendDirectory encodes d for snapshots and digests: uvarint epoch,
// uvarint len(Groups) and each group's id and peers, the slots as runs (uvarint count,
// then uvarint start, end, group per run), the nodes sorted by id
// (uvarint count, then id and address).
func AppendDirectory(dst []byte, d *Directory) []byte {
	dst = binary.AppendUvarint(dst, d.Epoch)
	dst = binary.AppendUvarint(dst, uint64(len(d.Groups)))
	for _, g := range d.Groups {
		dst = binary.AppendUvarint(dst, uint64(g.ID))
		dst = appendPeers(dst, g.Peers)
	}
	runs := Runs(d.Slots)
	dst = binary.AppendUvarint(dst, uint64(len(runs)))
	for _, r := range runs {
		dst = binary.AppendUvarint(dst, uint64(r.Start))
		dst = binary.AppendUvarint(dst, uint64(r.End))
		dst = binary.AppendUvarint(dst, uint64(r.Group))
	}
	ids := make([]string, 0, len(d.Nodes))
	for id := range d.Nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	for _, id := range ids {
		dst = codec.AppendString(dst, id)
		dst = codec.AppendString(dst, d.Nodes[id])
	}
	// Moves (absent in a directory that never had one, and no
	// placement).
	if len(d.Moves) == 0 && d.NextMove == 0 && d.Replicas == 0 {
		return dst
	}
	dst = binary.AppendUvarint(dst, d.NextMove)
	dst = binary.AppendUvarint(dst, uint64(len(d.Moves)))
	for _, m := range d.Moves {
		dst = binary.AppendUvarint(dst, m.ID)
		dst = binary.AppendUvarint(dst, uint64(m.Start))
		dst = binary.AppendUvarint(dst, uint64(m.End))
		dst = binary.AppendUvarint(dst, uint64(m.Source))
		dst = binary.AppendUvarint(dst, uint64(m.Target))
		dst = append(dst, m.State)
		dst = binary.AppendVarint(dst, m.Began)
		dst = binary.AppendVarint(dst, m.Ended)
	}
	// Placement (absent in a directory without a replication factor):
	// uvarint R, then per group (in Groups' order) its replicas, its
	// learner and the replica leaving, its leader and the leader's term.
	if d.Replicas == 0 {
		return dst
	}
	dst = binary.AppendUvarint(dst, uint64(d.Replicas))
	for _, g := range d.Groups {
		dst = binary.AppendUvarint(dst, uint64(len(g.Replicas)))
		for _, n := range g.Replicas {
			dst = codec.AppendString(dst, n)
		}
		dst = codec.AppendString(dst, g.Learner)
		dst = codec.AppendString(dst, g.Leaving)
		dst = codec.AppendString(dst, g.Leader)
		dst = binary.AppendUvarint(dst, g.LeaderTerm)
	}
	// Node states and finished replica moves (absent while there are
	// neither): uvarint moves finished, uvarint count, then each node id
	// (sorted) and its state byte.
	if len(d.States) == 0 && d.ReplicasAdded == 0 {
		return dst
	}
	dst = binary.AppendUvarint(dst, d.ReplicasAdded)
	ids = ids[:0]
	for id := range d.States {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	for _, id := range ids {
		dst = append(codec.AppendString(dst, id), d.States[id])
	}
	return dst
}

// DecodeDirectory decodes AppendDirectory's encoding (ErrBadSnapshot when
// it does not decode).
func DecodeDirectory(b []byte) (*Directory, error) {
	dec := codec.Reader{B: b}
	d := EmptyDirectory()
	d.Epoch = dec.Uvarint()
	ng := dec.Uvarint()
	if dec.Err != nil || ng > slots.Count {
		return nil, ErrBadSnapshot
	}
	for range ng {
		id := uint32(dec.Uvarint())
		d.Groups = append(d.Groups, Group{ID: id, Peers: peers(&dec)})
	}
	nr := dec.Uvarint()
	if dec.Err != nil || nr > slots.Count {
		return nil, ErrBadSnapshot
	}
	for range nr {
		start, end, g := dec.Uvarint(), dec.Uvarint(), dec.Uvarint()
		if dec.Err != nil || start > end || end >= slots.Count || g > 1<<31 {
			return nil, ErrBadSnapshot
		}
		for s := start; s <= end; s++ {
			d.Slots[s] = uint32(g)
		}
	}
	nn := dec.Uvarint()
	if dec.Err != nil || nn > 1<<16 {
		return nil, ErrBadSnapshot
	}
	for range nn {
		id, addr := string(dec.Bytes()), string(dec.Bytes())
		d.Nodes[id] = addr
	}
	if dec.Err == nil && len(dec.B) > 0 {
		d.NextMove = dec.Uvarint()
		nm := dec.Uvarint()
		if dec.Err != nil || nm > 1024 {
			return nil, ErrBadSnapshot
		}
		for range nm {
			m := Move{ID: dec.Uvarint(), Start: int(dec.Uvarint()), End: int(dec.Uvarint()),
				Source: uint32(dec.Uvarint()), Target: uint32(dec.Uvarint()), State: dec.Byte()}
			m.Began, m.Ended = dec.Varint(), dec.Varint()
			d.Moves = append(d.Moves, m)
		}
	}
	if dec.Err == nil && len(dec.B) > 0 {
		d.Replicas = int(dec.Uvarint())
		if dec.Err != nil || d.Replicas == 0 || d.Replicas > 16 {
			return nil, ErrBadSnapshot
		}
		for i := range d.Groups {
			g := &d.Groups[i]
			n := dec.Uvarint()
			if dec.Err != nil || n > 1024 {
				return nil, ErrBadSnapshot
			}
			for range n {
				g.Replicas = append(g.Replicas, string(dec.Bytes()))
			}
			g.Learner, g.Leaving, g.Leader = string(dec.Bytes()), string(dec.Bytes()), string(dec.Bytes())
			g.LeaderTerm = dec.Uvarint()
		}
	}
	if dec.Err == nil && len(dec.B) > 0 {
		d.ReplicasAdded = dec.Uvarint()
		n := dec.Uvarint()
		if dec.Err != nil || n > 1<<16 {
			return nil, ErrBadSnapshot
		}
		for range n {
			id := string(dec.Bytes())
			d.States[id] = dec.Byte()
		}
	}
	if dec.Err != nil || len(dec.B) != 0 {
		return nil, ErrBadSnapshot
	}
	return d, nil
}

// appendPeers encodes a peer list: uvarint count, then id and address.
func appendPeers(dst []byte, peers []Peer) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(peers)))
	for _, p := range peers {
		dst = codec.AppendString(codec.AppendString(dst, p.ID), p.Addr)
	}
	return dst
}

func peers(d *codec.Reader) []Peer {
	n := d.Uvarint()
	if d.Err != nil || n > 1024 {
		d.Fail()
		return nil
	}
	var peers []Peer
	for range n {
		peers = append(peers, Peer{ID: string(d.Bytes()), Addr: string(d.Bytes())})
	}
	return peers
}

// Run is a run of consecutive slots with one owner.
type Run struct {
	Start, End int // inclusive
	Group      uint32
}

// Runs lists the runs of owned slots (group != 0) in slot order.
func Runs(owner []uint32) []Run {
	var runs []Run
	for s := 0; s < len(owner); {
		e := s
		for e+1 < len(owner) && owner[e+1] == owner[s] {
			e++
		}
		if owner[s] != 0 {
			runs = append(runs, Run{Start: s, End: e, Group: owner[s]})
		}
		s = e + 1
	}
	return runs
}
