package server

import (
	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/slots"
)

// Routing keyed commands by hash slot (the Redis Cluster protocol), when
// Config.Router is set. Server.process calls route after the arity, ACL
// and key-length checks, so a redirected command never reaches the
// backend, and queues its error with Server.reply, in order with the
// pipeline's batched replies. Keyless commands are never routed.

// SlotRouter is what the Redis Cluster protocol needs from a backend whose
// keyspace is split into hash slots (cluster mode with --groups): routing
// here, MOVED, CROSSSLOT and CLUSTERDOWN, and command's CLUSTER commands
// (command.Slots). A server without Config.Router answers CLUSTER as a
// Redis without cluster support.
type SlotRouter interface {
	command.Slots
	// Route says how this node handles a keyed command on slot: serve it
	// here through the Backend (this node leads the slot's group, or
	// forwards to its leader), or redirect the client to addr (MOVED),
	// or, with serve false and addr "", answer CLUSTERDOWN: no group owns
	// the slot, or its group has no leader this node knows of.
	Route(slot int) (serve bool, addr string)
}

// route computes the slot of every key of cmd (one CRC16 per key) and
// asks the router what to do with it. It returns "" when this node serves
// the command, else the error reply, counted in Stats: CROSSSLOT when the
// keys hash to different slots (even if one group owns both: a later
// move could split them), MOVED to the slot's leader, or CLUSTERDOWN when
// no leader is known. A command whose key positions find no key (a
// malformed RL.CHECK) is served, and its parser answers it.
func (s *Server) route(cmd *command.Cmd, args [][]byte) string {
	slot := -1
	for i := range cmd.KeyPositions(args) {
		sl := slots.Of(args[i])
		if slot < 0 {
			slot = sl
		} else if sl != slot {
			s.Stats.ClusterCrossSlot.Add(1)
			return command.ErrCrossSlot
		}
	}
	if slot < 0 {
		return ""
	}
	serve, addr := s.router.Route(slot)
	switch {
	case serve:
		return ""
	case addr != "":
		s.Stats.ClusterMoved.Add(1)
		return command.Moved(slot, addr)
	default:
		s.Stats.ClusterDown.Add(1)
		return command.ErrClusterDown
	}
}

// ClusterRedirects counts the keyed commands refused by slot routing since
// start (not reset by CONFIG RESETSTAT, for metrics).
type ClusterRedirects struct {
	Moved     int64 // -MOVED: the slot's leader is another node
	CrossSlot int64 // -CROSSSLOT: the keys hash to different slots
	Down      int64 // -CLUSTERDOWN: no leader known for the slot
}

// ClusterRedirects returns the slot routing's refusals since start.
func (s *Server) ClusterRedirects() ClusterRedirects {
	return ClusterRedirects{
		Moved:     s.Stats.ClusterMoved.Load(),
		CrossSlot: s.Stats.ClusterCrossSlot.Load(),
		Down:      s.Stats.ClusterDown.Load(),
	}
}
