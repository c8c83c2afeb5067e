package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// The slot directory: a sharded cluster's metadata, replicated by its meta
// group (group 0, which owns no keys). It holds which data groups exist,
// which group owns each of the 16,384 hash slots, and each node's client
// address; every node reads it from its own replica of the meta group and
// opens, routes and advertises from it. Changes are cmdMeta log entries;
// every change raises the epoch.

// NumSlots is the number of hash slots, as in Redis Cluster.
const NumSlots = 16384

// Directory is one version of the slot directory. It is immutable once
// published: readers share it.
type Directory struct {
	Epoch  uint64            // 0: not initialised yet
	Groups []GroupInfo       // data groups, ascending by ID
	Slots  []uint32          // NumSlots entries: the owning group, 0 for none
	Nodes  map[string]string // node id -> client (RESP) address

	// Slot moves (slotmove.go, groups/mover.go): at most one in
	// progress, then the last finished ones, oldest first.
	Moves    []Move
	NextMove uint64 // the id the next move gets
}

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

// GroupInfo is one data group of the directory.
type GroupInfo struct {
	ID uint32
	// Peers is the group's first configuration: the nodes that bootstrap
	// it. Nodes that join later are added by the group's leader.
	Peers []Peer
}

// Group returns the group's entry, or nil.
func (d *Directory) Group(id uint32) *GroupInfo {
	for i := range d.Groups {
		if d.Groups[i].ID == id {
			return &d.Groups[i]
		}
	}
	return nil
}

// cmdMeta changes the directory (meta group only): varint nowNanos, then
// an op byte and its operands. Append-only, like the command types.
const cmdMeta byte = 8

// msgMeta forwards a directory change to the meta group's leader: body: the
// op byte and operands; reply: uvarint result (the new group's id for
// metaAddGroup, else 0).
const msgMeta byte = 13

const (
	// metaInit: uvarint n, then the peers (appendPeers). On an
	// uninitialised directory, creates groups 1..n with those peers and
	// splits the slots evenly over them in order; otherwise does nothing
	// (the first init wins).
	metaInit byte = 1
	// metaRegister: node id, client address.
	metaRegister byte = 2
	// metaForget: node id (a removed node).
	metaForget byte = 3
	// metaAddGroup: the peers (appendPeers). Adds a group with the next id
	// and no slots.
	metaAddGroup byte = 4
	// metaMoveBegin: uvarint start, end, target. Records a move of the
	// range from its owner to the target; the result is its id. Refused
	// (ErrMoveInvalid) while another move is in progress, or when the
	// range is not owned whole by one group other than the target.
	metaMoveBegin byte = 5
	// metaMoveCommitted: uvarint id. Points the move's range at its target.
	metaMoveCommitted byte = 6
	// metaMoveReleased: uvarint id. Ends the move.
	metaMoveReleased byte = 7
)

// ErrMoveInvalid: a move the directory refuses (the reason is in the
// text).
type ErrMoveInvalid struct{ Reason string }

func (e *ErrMoveInvalid) Error() string    { return "slot move refused: " + e.Reason }
func (e *ErrMoveInvalid) WireText() string { return "ERR " + e.Reason }

var errBadMeta = errors.New("bad directory change")

// ErrNotInitialised: the directory has not been initialised (no group).
var ErrNotInitialised = &Error{"slot directory not initialised", "CLUSTERDOWN the slot directory is not initialised yet; retry"}

func (d *Directory) clone() *Directory {
	c := &Directory{Epoch: d.Epoch, Groups: slices.Clone(d.Groups), Slots: slices.Clone(d.Slots), Nodes: make(map[string]string, len(d.Nodes)),
		Moves: slices.Clone(d.Moves), NextMove: d.NextMove}
	for k, v := range d.Nodes {
		c.Nodes[k] = v
	}
	if c.Slots == nil {
		c.Slots = make([]uint32, NumSlots)
	}
	return c
}

func emptyDirectory() *Directory {
	return &Directory{Slots: make([]uint32, NumSlots), Nodes: map[string]string{}}
}

// applyMeta returns the directory after op, and op's result. now is the
// entry's time. An *ErrMoveInvalid leaves the directory as it is.
func applyMeta(d *Directory, op []byte, now int64) (*Directory, uint64, error) {
	dec := decoder{b: op}
	code := dec.byte()
	if dec.err != nil {
		return nil, 0, errBadMeta
	}
	switch code {
	case metaInit:
		n := dec.uvarint()
		peers := dec.peers()
		if dec.err != nil || len(dec.b) != 0 || n == 0 || n > 1024 || len(peers) == 0 {
			return nil, 0, errBadMeta
		}
		if d.Epoch != 0 {
			return d, 0, nil
		}
		c := d.clone()
		for g := uint32(1); g <= uint32(n); g++ {
			c.Groups = append(c.Groups, GroupInfo{ID: g, Peers: peers})
		}
		for s := range NumSlots {
			c.Slots[s] = 1 + uint32(uint64(s)*n/NumSlots)
		}
		c.Epoch = 1
		return c, 0, nil
	case metaRegister:
		id, addr := string(dec.bytes()), string(dec.bytes())
		if dec.err != nil || len(dec.b) != 0 || id == "" {
			return nil, 0, errBadMeta
		}
		if d.Nodes[id] == addr {
			return d, 0, nil
		}
		c := d.clone()
		c.Nodes[id] = addr
		c.Epoch++
		return c, 0, nil
	case metaForget:
		id := string(dec.bytes())
		if dec.err != nil || len(dec.b) != 0 {
			return nil, 0, errBadMeta
		}
		if _, ok := d.Nodes[id]; !ok {
			return d, 0, nil
		}
		c := d.clone()
		delete(c.Nodes, id)
		c.Epoch++
		return c, 0, nil
	case metaAddGroup:
		peers := dec.peers()
		if dec.err != nil || len(dec.b) != 0 || len(peers) == 0 {
			return nil, 0, errBadMeta
		}
		if d.Epoch == 0 || len(d.Groups) >= 1024 {
			return d, 0, nil
		}
		c := d.clone()
		g := uint32(1)
		if len(c.Groups) > 0 {
			g = c.Groups[len(c.Groups)-1].ID + 1
		}
		c.Groups = append(c.Groups, GroupInfo{ID: g, Peers: peers})
		c.Epoch++
		return c, uint64(g), nil
	case metaMoveBegin:
		start, end, target := dec.uvarint(), dec.uvarint(), dec.uvarint()
		if dec.err != nil || len(dec.b) != 0 || start > end || end >= NumSlots || target > 1<<31 {
			return nil, 0, errBadMeta
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
	case metaMoveCommitted, metaMoveReleased:
		id := dec.uvarint()
		if dec.err != nil || len(dec.b) != 0 {
			return nil, 0, errBadMeta
		}
		cur := d.Current()
		if cur == nil || cur.ID != id {
			return d, 0, nil // done already (or another move's): idempotent
		}
		want := MoveBegun
		if code == metaMoveReleased {
			want = MoveCommitted
		}
		if cur.State != want {
			return d, 0, nil
		}
		c := d.clone()
		m := c.Current()
		if code == metaMoveCommitted {
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
	return nil, 0, errBadMeta
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

// appendDirectory encodes d for snapshots and digests: uvarint epoch,
// uvarint len(Groups) and each group's id and peers, the slots as runs (uvarint count,
// then uvarint start, end, group per run), the nodes sorted by id
// (uvarint count, then id and address).
func appendDirectory(dst []byte, d *Directory) []byte {
	dst = binary.AppendUvarint(dst, d.Epoch)
	dst = binary.AppendUvarint(dst, uint64(len(d.Groups)))
	for _, g := range d.Groups {
		dst = binary.AppendUvarint(dst, uint64(g.ID))
		dst = appendPeers(dst, g.Peers)
	}
	runs := SlotRuns(d.Slots)
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
		dst = appendString(dst, id)
		dst = appendString(dst, d.Nodes[id])
	}
	// Moves (absent in a directory that never had one).
	if len(d.Moves) == 0 && d.NextMove == 0 {
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
	return dst
}

func decodeDirectory(b []byte) (*Directory, error) {
	dec := decoder{b: b}
	d := emptyDirectory()
	d.Epoch = dec.uvarint()
	ng := dec.uvarint()
	if dec.err != nil || ng > NumSlots {
		return nil, errBadSnapshot
	}
	for range ng {
		id := uint32(dec.uvarint())
		d.Groups = append(d.Groups, GroupInfo{ID: id, Peers: dec.peers()})
	}
	nr := dec.uvarint()
	if dec.err != nil || nr > NumSlots {
		return nil, errBadSnapshot
	}
	for range nr {
		start, end, g := dec.uvarint(), dec.uvarint(), dec.uvarint()
		if dec.err != nil || start > end || end >= NumSlots || g > 1<<31 {
			return nil, errBadSnapshot
		}
		for s := start; s <= end; s++ {
			d.Slots[s] = uint32(g)
		}
	}
	nn := dec.uvarint()
	if dec.err != nil || nn > 1<<16 {
		return nil, errBadSnapshot
	}
	for range nn {
		id, addr := string(dec.bytes()), string(dec.bytes())
		d.Nodes[id] = addr
	}
	if dec.err == nil && len(dec.b) > 0 {
		d.NextMove = dec.uvarint()
		nm := dec.uvarint()
		if dec.err != nil || nm > 1024 {
			return nil, errBadSnapshot
		}
		for range nm {
			m := Move{ID: dec.uvarint(), Start: int(dec.uvarint()), End: int(dec.uvarint()),
				Source: uint32(dec.uvarint()), Target: uint32(dec.uvarint()), State: dec.byte()}
			m.Began, m.Ended = dec.varint(), dec.varint()
			d.Moves = append(d.Moves, m)
		}
	}
	if dec.err != nil || len(dec.b) != 0 {
		return nil, errBadSnapshot
	}
	return d, nil
}

// appendPeers encodes a peer list: uvarint count, then id and address.
func appendPeers(dst []byte, peers []Peer) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(peers)))
	for _, p := range peers {
		dst = appendString(appendString(dst, p.ID), p.Addr)
	}
	return dst
}

func (d *decoder) peers() []Peer {
	n := d.uvarint()
	if d.err != nil || n > 1024 {
		d.fail()
		return nil
	}
	var peers []Peer
	for range n {
		peers = append(peers, Peer{ID: string(d.bytes()), Addr: string(d.bytes())})
	}
	return peers
}

// SlotRun is a run of consecutive slots with one owner.
type SlotRun struct {
	Start, End int // inclusive
	Group      uint32
}

// SlotRuns lists the runs of owned slots (group != 0) in slot order.
func SlotRuns(owner []uint32) []SlotRun {
	var runs []SlotRun
	for s := 0; s < len(owner); {
		e := s
		for e+1 < len(owner) && owner[e+1] == owner[s] {
			e++
		}
		if owner[s] != 0 {
			runs = append(runs, SlotRun{Start: s, End: e, Group: owner[s]})
		}
		s = e + 1
	}
	return runs
}

// Directory is this replica's slot directory as of its last applied entry
// (never nil; Epoch 0 until initialised). Only the meta group's is used.
func (n *Node) Directory() *Directory { return n.fsm.directory() }

// DirectoryChanged is closed at the next change of the directory.
func (n *Node) DirectoryChanged() <-chan struct{} { return n.fsm.dirChanged() }

// InitDirectory creates groups 1..groups with the slots split evenly, unless
// the directory is initialised already (then it does nothing).
func (n *Node) InitDirectory(ctx context.Context, groups int, peers []Peer) error {
	_, err := n.proposeMeta(ctx, appendPeers(binary.AppendUvarint([]byte{metaInit}, uint64(groups)), peers))
	return err
}

// RegisterNode records a node's client address.
func (n *Node) RegisterNode(ctx context.Context, id, respAddr string) error {
	_, err := n.proposeMeta(ctx, appendString(appendString([]byte{metaRegister}, id), respAddr))
	return err
}

// ForgetNode drops a node's record.
func (n *Node) ForgetNode(ctx context.Context, id string) error {
	_, err := n.proposeMeta(ctx, appendString([]byte{metaForget}, id))
	return err
}

// AddGroup adds a data group with no slots, bootstrapped by peers, and
// returns its id.
func (n *Node) AddGroup(ctx context.Context, peers []Peer) (uint32, error) {
	v, err := n.proposeMeta(ctx, appendPeers([]byte{metaAddGroup}, peers))
	if err == nil && v == 0 {
		return 0, ErrNotInitialised
	}
	return uint32(v), err
}

// BeginMove records a move of slots [start, end] to group target and
// returns its id; *ErrMoveInvalid says why the directory refused it.
func (n *Node) BeginMove(ctx context.Context, start, end int, target uint32) (uint64, error) {
	op := binary.AppendUvarint([]byte{metaMoveBegin}, uint64(start))
	op = binary.AppendUvarint(op, uint64(end))
	return n.proposeMeta(ctx, binary.AppendUvarint(op, uint64(target)))
}

// MoveCommitted points move id's range at its target.
func (n *Node) MoveCommitted(ctx context.Context, id uint64) error {
	_, err := n.proposeMeta(ctx, binary.AppendUvarint([]byte{metaMoveCommitted}, id))
	return err
}

// MoveReleased ends move id.
func (n *Node) MoveReleased(ctx context.Context, id uint64) error {
	_, err := n.proposeMeta(ctx, binary.AppendUvarint([]byte{metaMoveReleased}, id))
	return err
}

func (n *Node) proposeMeta(ctx context.Context, op []byte) (uint64, error) {
	v, err := metaOps.propose(ctx, n, op)
	return uint64(v), err
}

// validMetaOp reports whether op decodes as a directory change.
func validMetaOp(op []byte) bool {
	_, _, err := applyMeta(emptyDirectory(), op, 0)
	return !errors.Is(err, errBadMeta)
}

// applyMetaEntry applies a cmdMeta entry (the caller holds f.mu). An op that
// does not decode was refused before the log, so it panics like any
// undecodable entry.
func (f *fsm) applyMetaEntry(now int64, op []byte, index uint64) any {
	d, v, err := applyMeta(f.dir.Load(), op, now)
	if errors.Is(err, errBadMeta) {
		panic(fmt.Sprintf("cluster: log entry %d: %v", index, err))
	}
	if err != nil {
		return &stateResult{err: err}
	}
	f.setDirectory(d)
	return &stateResult{v: int64(v)}
}
