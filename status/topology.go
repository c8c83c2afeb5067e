package status

// Topology is a sharded cluster's slot map as one node sees it: the
// answer behind CLUSTER SLOTS, SHARDS, NODES and INFO.
type Topology struct {
	MyID    string // this node's 40-hex cluster id
	Epoch   uint64 // the slot directory's epoch (raised by every change)
	Nodes   []TopologyNode
	Ranges  []SlotRange // sorted by Start, disjoint; slots in none are not assigned
	Groups  []Group     // every data group, by ID
	Forward bool        // --cluster-redirect forward: this node serves every slot, forwarding to the owner
	Moves   []Move      // the last finished slot moves, oldest first, then the one in progress
	// Rebalancing: a rebalance started on this node is running.
	Rebalancing bool
}

// Move is one slot move.
type Move struct {
	ID             uint64
	Start, End     int
	Source, Target uint32
	State          string // "begun", "committed" (the target owns the range), "released" (over)
	Keys           int    // records imported by the target so far (this node's replica)
	Began, Ended   int64  // unix ns; Ended 0 while in progress
}

// TopologyNode is one process of the cluster.
type TopologyNode struct {
	ID       string // 40-hex cluster id (derived from Name)
	Name     string // the --node-id
	Addr     string // client (RESP) address host:port; "" if not registered yet
	RaftAddr string // host:port of Raft and forwarding (the cluster bus, @cport)
	Myself   bool
}

// SlotRange is a run of consecutive slots owned by one group.
type SlotRange struct {
	Start, End int    // inclusive, 0..16383
	Group      uint32 // the owning Raft group
	Leader     string // the owning group's leader, as a TopologyNode.ID; "" while none is known
}

// Group is one data Raft group as this node sees it.
type Group struct {
	ID      uint32
	Leader  string // node Name ("" while none is known)
	Role    string // this node's role in the group: "leader", "follower", "candidate", "shutdown"
	Slots   int    // slots owned
	Ranges  []SlotRange
	Applied uint64 // this replica's applied index
	Commit  uint64 // this replica's commit index
	LastLog uint64
	Members []string // node Names in the group's Raft configuration
	Keys    int      // live keys on this replica (approximate: stored records)
	Lag     uint64   // LastLog - Applied on this replica
	// Replicas are the nodes the directory places the group's voters on,
	// Learner the node being added ("" for none); both empty in a cluster
	// without a replication factor, where every node holds every group.
	Replicas []string
	Learner  string
}
