package command

import "context"

// RL.CLUSTER and ROLE reach the cluster through Env.Cluster (a replicated
// backend's); without it they answer as Redis does without cluster
// support. The group commands need a sharded backend besides.
func init() {
	register(
		container("rl.cluster", "A container for Raft cluster commands.", "cluster",
			clusterSub("nodes", 2, "Lists the members: id raft_addr resp_addr flags, one per line.",
				func(x *Call, cl Cluster, _ [][]byte) { verbatim(&x.W, RaftNodes(cl.ClusterStatus())) }),
			clusterSub("leader", 2, "Returns the leader's [id, raft_addr, resp_addr], or null while none is known.",
				func(x *Call, cl Cluster, _ [][]byte) { RaftLeader(&x.W, cl.ClusterStatus()) }),
			dangerous(clusterSub("join", 4, "Adds a voting member: RL.CLUSTER JOIN node-id raft-host:port.",
				func(x *Call, cl Cluster, args [][]byte) {
					x.okOr(textOf(cl.Join(context.Background(), string(args[2]), string(args[3]))))
				})),
			dangerous(clusterSub("remove", 3, "Removes a member: RL.CLUSTER REMOVE node-id.",
				func(x *Call, cl Cluster, args [][]byte) {
					x.okOr(textOf(cl.Remove(context.Background(), string(args[2]))))
				})),
			clusterSub("digest", 2, "Returns [applied_index, state_digest] of this replica.", clusterDigest),
			clusterSub("groups", 2, "Lists the Raft groups of a sharded cluster: id leader role slots keys applied lag, one per line.", clusterGroups),
			dangerous(clusterSub("addgroup", 2, "Adds a Raft group with no slots to a sharded cluster; returns its id.", clusterAddGroup)),
			dangerous(clusterSub("move", 5, "Moves slots to a group online: RL.CLUSTER MOVE first-slot last-slot group; returns the move's id.", clusterMove)),
			dangerous(clusterSub("rebalance", 2, "Moves slots, one range at a time, until every group owns as many as the others (within one); runs in the background.", clusterRebalance)),
			clusterSub("moves", 2, "Lists the slot moves: the one in progress and the last finished ones.", clusterMoves),
		),
		&Cmd{Name: "role", Arity: 1, Flags: []string{"noscript", "loading", "stale", "fast"}, ACL: []string{"@admin", "@fast", "@dangerous"},
			Summary: "Returns the replication role.", Group: "server", Since: "2.8.12", Run: role},
	)
}

// dangerous adds @dangerous to c's ACL categories: membership changes
// can take the cluster down.
func dangerous(c *Cmd) *Cmd {
	c.ACL = append(c.ACL[:len(c.ACL):len(c.ACL)], "@dangerous")
	return c
}

func clusterSub(name string, arity int, summary string, run func(*Call, Cluster, [][]byte)) *Cmd {
	return &Cmd{Name: "rl.cluster|" + name, Arity: arity, Flags: []string{"admin", "stale"}, ACL: []string{"@admin", "@slow"},
		Summary: summary, Group: "cluster", Since: "0.4.0",
		Run: func(x *Call, args [][]byte) {
			if x.Env.Cluster == nil {
				x.fail(ErrTextNoCluster)
				return
			}
			run(x, x.Env.Cluster, args)
		}}
}

// textOf is err's wire text, or "" for nil.
func textOf(err error) string {
	if err == nil {
		return ""
	}
	return Text(err)
}

func clusterDigest(x *Call, cl Cluster, _ [][]byte) {
	idx, digest, err := cl.Digest(context.Background())
	if err != nil {
		x.fail(Text(err))
		return
	}
	x.W.Array(2)
	x.W.Int(int64(idx))
	x.W.BulkString(digest)
}

func clusterGroups(x *Call, _ Cluster, _ [][]byte) {
	if x.Env.Slots == nil {
		x.fail(ErrTextNotSharded)
		return
	}
	verbatim(&x.W, Groups(x.Env.Slots.Topology()))
}

func clusterAddGroup(x *Call, _ Cluster, _ [][]byte) {
	ga := x.Env.GroupAdder
	if ga == nil {
		x.fail(ErrTextNotSharded)
		return
	}
	g, err := ga.AddGroup(context.Background())
	switch {
	case err != nil && g == 0:
		x.fail(Text(err))
	case err != nil:
		x.fail("ERR " + err.Error())
	default:
		x.W.Int(int64(g))
	}
}

func clusterMove(x *Call, _ Cluster, args [][]byte) {
	mv := x.Env.SlotMover
	if mv == nil {
		x.fail(ErrTextNotSharded)
		return
	}
	start, end, g, text := ParseMove(args)
	if text != "" {
		x.fail(text)
		return
	}
	id, err := mv.MoveSlots(context.Background(), start, end, g)
	if err != nil {
		x.fail(Text(err))
		return
	}
	x.W.Int(int64(id))
}

func clusterRebalance(x *Call, _ Cluster, _ [][]byte) {
	mv := x.Env.SlotMover
	switch {
	case mv == nil:
		x.fail(ErrTextNotSharded)
	case !mv.StartRebalance():
		x.fail(errRebalanceRunning)
	default:
		x.W.OK()
	}
}

func clusterMoves(x *Call, _ Cluster, _ [][]byte) {
	if x.Env.Slots == nil {
		x.fail(ErrTextNotSharded)
		return
	}
	verbatim(&x.W, Moves(x.Env.Slots.Topology()))
}

// role answers ROLE (Role): alone or sharded, a master; in one Raft
// group, the leader a master, a follower a slave.
func role(x *Call, _ [][]byte) {
	if cl := x.Env.Cluster; cl == nil || x.Env.Slots != nil {
		Role(&x.W, nil)
		return
	}
	st := x.Env.Cluster.ClusterStatus()
	Role(&x.W, &st)
}
