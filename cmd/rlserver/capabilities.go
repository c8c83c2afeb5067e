package main

import (
	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/groups"
	"github.com/rlserver/rlserver/server"
	"github.com/rlserver/rlserver/standalone"
)

// What each backend can do beyond server.Backend, declared to the edge in
// server.Config's capability fields. The server never looks for a
// capability by type assertion: a backend has one only where it is
// declared here. The assertions fail the build when a backend stops
// providing what is claimed for it; TestCapabilities pins which fields
// each kind of server gets.
var (
	// Alone: the engine with its policies, and the process's snapshots
	// (persist.go).
	_ server.Backend      = (*standalone.Backend)(nil)
	_ server.Policies     = (*standalone.Backend)(nil)
	_ server.Scanner      = (*standalone.Backend)(nil)
	_ server.CmdWriter    = (*standalone.Backend)(nil)
	_ server.LiveEngine   = (*standalone.Backend)(nil)
	_ server.Persistence  = (*snapshots)(nil)
	_ server.WriteStopper = (*snapshots)(nil)

	// One Raft group.
	_ server.Backend       = (*cluster.Node)(nil)
	_ server.Policies      = (*cluster.Node)(nil)
	_ server.Scanner       = (*cluster.Node)(nil)
	_ server.CmdWriter     = (*cluster.Node)(nil)
	_ server.Cluster       = (*cluster.Node)(nil)
	_ server.RaftSnapshots = (*cluster.Node)(nil)

	// Sharded (--groups): the meta group and a replica of every data
	// group, owning hash slots.
	_ server.Backend       = (*groups.Host)(nil)
	_ server.Policies      = (*groups.Host)(nil)
	_ server.Scanner       = (*groups.Host)(nil)
	_ server.CmdWriter     = (*groups.Host)(nil)
	_ server.Cluster       = (*groups.Host)(nil)
	_ server.RaftSnapshots = (*groups.Host)(nil)
	_ server.SlotRouter    = (*groups.Host)(nil)
	_ server.GroupAdder    = (*groups.Host)(nil)
	_ server.SlotMover     = (*groups.Host)(nil)
)

// declareStandalone declares a server running alone: its policies, and
// the snapshots that answer SAVE and may refuse writes after a failed one.
func declareStandalone(cfg *server.Config, b *standalone.Backend, snaps *snapshots) {
	cfg.Policies = b
	cfg.Scanner = b
	cfg.CmdWriter = b
	cfg.LiveEngine = b
	cfg.Persistence = snaps
	cfg.WriteStopper = snaps
}

// declareNode declares a node of one Raft group: policies through the
// log, the cluster commands, Raft snapshots in INFO. No hash slots.
func declareNode(cfg *server.Config, n *cluster.Node) {
	cfg.Policies = n
	cfg.Scanner = n
	cfg.CmdWriter = n
	cfg.Cluster = n
	cfg.RaftSnapshots = n
}

// declareHost declares a sharded node: a node of a group (the meta
// group's view) that also owns hash slots, adds groups and moves slots.
func declareHost(cfg *server.Config, h *groups.Host) {
	cfg.Policies = h
	cfg.Scanner = h
	cfg.CmdWriter = h
	cfg.Cluster = h
	cfg.RaftSnapshots = h
	cfg.Router = h
	cfg.GroupAdder = h
	cfg.SlotMover = h
}
