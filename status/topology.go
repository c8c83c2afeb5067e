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
	// Placement is the replica placement's state; nil in a cluster
	// without a replication factor (every node holds every group).
	Placement *Placement
}

// Placement counts the state of a placed cluster (--replicas): what
// INFO's cluster section and the metrics show.
type Placement struct {
	Replicas        int    // the replication factor R
	UnderReplicated int    // groups with fewer than min(R, placeable nodes) voters on nodes not dead
	MovesInProgress int    // groups adding a replica (a learner recorded)
	MovesFinished   uint64 // replicas added since the cluster began (learners promoted)
	DeadNodes       int    // nodes the meta group's leader recorded as dead
	DrainingNodes   int    // nodes being drained by RL.CLUSTER REMOVE
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
	PlacedNode
}

// PlacedNode is a node's share of a placed cluster (all zero without a
// replication factor).
type PlacedNode struct {
	Placed   bool // the cluster has a replication factor
	Replicas int  // groups with a voter or a learner on the node
	Leads    int  // groups the node leads, as the directory records
	Dead     bool // recorded dead by the meta group's leader
	Draining bool // being drained (RL.CLUSTER REMOVE)
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
