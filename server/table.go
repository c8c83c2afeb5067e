package server

import (
	"strings"

	"github.com/rlserver/rlserver/command"
)

// The command table is package command's (command.Cmd): names, arity,
// flags, keys, and how each command runs. The edge answers itself the
// commands that need the connection or the server (command.Cmd.Edge),
// with the handlers here, and writes the replies of command's.

// handler answers one of the edge's own commands.
type handler func(s *Server, c *client, args [][]byte) outcome

// edge holds the edge's handlers by command ID.
var edge []handler

func init() {
	edge = make([]handler, len(command.All()))
	for name, h := range map[string]handler{
		"hello": cmdHello, "auth": cmdAuth, "quit": cmdQuitConn, "reset": cmdReset,
		"info": cmdInfo, "rl.top": cmdTop, "rl.policy|load": cmdPolicyLoad,
		"config|get": cmdConfigGet, "config|set": cmdConfigSet, "config|resetstat": cmdConfigResetStat,
		"acl|whoami": cmdACLWhoami, "acl|list": cmdACLList, "acl|users": cmdACLUsers,
		"client|setname": cmdClientSetName, "client|getname": cmdClientGetName, "client|id": cmdClientID,
		"client|setinfo": cmdClientSetInfo, "client|info": cmdClientInfo, "client|list": cmdClientList,
		"client|kill": cmdClientKill, "client|no-evict": cmdClientNoEvict, "client|reply": cmdClientReply,
		"client|unblock": cmdClientUnblock,
	} {
		c := command.ByName(name)
		if c == nil || !c.Edge() {
			panic("server: " + name + " is not a command the edge answers")
		}
		edge[c.ID] = h
	}
	for _, c := range command.All() {
		if c.Edge() && edge[c.ID] == nil {
			panic("server: no handler for " + c.Name)
		}
	}
}

// run answers a command that is not batched, after the pending batch:
// a container's subcommand, the edge's own command, or command's, whose
// reply (or error) it writes.
func (s *Server) run(c *client, cmd *command.Cmd, args [][]byte) outcome {
	if cmd.Subcommands != nil && len(args) > 1 && !command.EqualFold(args[1], "help") {
		c.lower = appendLower(c.lower[:0], args[1])
		sc := cmd.Sub(c.lower)
		switch {
		case sc == nil:
			c.rep.error(command.UnknownSubcommand(args[1], strings.ToUpper(cmd.Name)))
			return cmdOK
		case !sc.ArityOK(len(args)):
			c.rep.error(command.WrongArity(sc.Name))
			return cmdOK
		case s.refusesWrite(sc):
			c.rep.error(command.ErrMisconf)
			return cmdOK
		}
		// CLIENT LIST's cmd= and INFO commandstats name the subcommand,
		// as Redis's do.
		c.sub = sc
		c.mu.Lock()
		c.lastCmd = sc.Name
		c.mu.Unlock()
		cmd = sc
	}
	if h := edge[cmd.ID]; h != nil {
		return h(s, c, args)
	}
	x := &c.call
	x.Reset(c.rep.resp3())
	if cmd.Run != nil {
		cmd.Run(x, args)
	} else {
		command.WriteHelp(&x.W, cmd) // a container's HELP
	}
	switch {
	case x.Err != "":
		c.rep.error(x.Err)
	default:
		if x.Failed {
			c.rep.failedRaw(x.W.B)
		}
		c.rep.conn.WriteRaw(x.W.B)
	}
	if cap(x.W.B) > maxKeptReply {
		x.W.B = nil // a large reply's buffer is not kept with the connection
	}
	if x.Quit {
		return cmdQuit
	}
	return cmdOK
}

// maxKeptReply bounds the reply buffer a connection keeps between
// commands, bytes.
const maxKeptReply = 64 << 10
