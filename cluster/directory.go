package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"
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
)

var errBadMeta = errors.New("bad directory change")

// ErrNotInitialised: the directory has not been initialised (no group).
var ErrNotInitialised = &Error{"slot directory not initialised", "CLUSTERDOWN the slot directory is not initialised yet; retry"}

func (d *Directory) clone() *Directory {
	c := &Directory{Epoch: d.Epoch, Groups: slices.Clone(d.Groups), Slots: slices.Clone(d.Slots), Nodes: make(map[string]string, len(d.Nodes))}
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

// applyMeta returns the directory after op, and op's result.
func applyMeta(d *Directory, op []byte) (*Directory, uint64, error) {
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
	}
	return nil, 0, errBadMeta
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

func (n *Node) proposeMeta(ctx context.Context, op []byte) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.CommitTimeout)
	defer cancel()
	return n.applyMetaOp(ctx, op, false)
}

// metaResult is what Apply returns for a cmdMeta entry.
type metaResult struct {
	v   uint64
	err error
}

func (n *Node) applyMetaOp(ctx context.Context, op []byte, localOnly bool) (uint64, error) {
	return applyOp(ctx, n, logOp[uint64]{
		entry: func(now time.Time) []byte {
			return append(appendEntryHeader(make([]byte, 0, 12+len(op)), cmdMeta, now.UnixNano()), op...)
		},
		leader: func(resp any) (uint64, error) {
			mr, ok := resp.(*metaResult)
			if !ok {
				return 0, ErrUnknownOutcome
			}
			return mr.v, mr.err
		},
		msg:  msgMeta,
		body: op,
		forwarded: func(reply []byte) (uint64, error) {
			v, k := binary.Uvarint(reply)
			if k <= 0 {
				return 0, ErrUnknownOutcome
			}
			return v, nil
		},
	}, localOnly)
}

// handleMeta serves a forwarded msgMeta on the leader. The op is checked
// before it can reach the log.
func (n *Node) handleMeta(ctx context.Context, op []byte) (byte, []byte) {
	if _, _, err := applyMeta(emptyDirectory(), op); err != nil {
		return statusBadRequest, nil
	}
	v, err := n.applyMetaOp(ctx, op, true)
	if err != nil {
		return statusOf(err), nil
	}
	return statusOK, binary.AppendUvarint(nil, v)
}

// applyMetaEntry applies a cmdMeta entry (the caller holds f.mu). An op that
// does not decode was refused before the log, so it panics like any
// undecodable entry.
func (f *fsm) applyMetaEntry(op []byte, index uint64) any {
	d, v, err := applyMeta(f.dir.Load(), op)
	if err != nil {
		panic(fmt.Sprintf("cluster: log entry %d: %v", index, err))
	}
	f.setDirectory(d)
	return &metaResult{v: v}
}
