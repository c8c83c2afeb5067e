package server

import (
	"time"

	"github.com/rlserver/rlserver/command"
)

// Lua scripts: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT. What a
// script does, and the optimistic runtime it runs on, is package
// command's (command.Scripts); the edge registers the commands, checks
// BUSY, and writes the outcome.

func init() {
	eval := func(name, since, summary string, sha, ro bool) *entry {
		flags := []string{"noscript", "stale", "skip_monitor", "may_replicate", "no_mandatory_keys", "movablekeys"}
		if ro {
			flags = []string{"readonly", "noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"}
		}
		return &entry{name: name, arity: -3, flags: flags, acl: []string{"@slow", "@scripting"},
			summary: summary, group: "scripting", since: since, movableKeys: command.EvalKeys,
			handler: func(s *Server, c *client, args [][]byte) outcome {
				s.write(c, s.scriptsOf().Eval(args, sha, ro, s.scriptRun(c)))
				return cmdOK
			}}
	}
	scriptSub := func(name string, arity int, flags []string, summary string, h func(*Server, *client, [][]byte) outcome) *entry {
		sc := sub("script", name, arity, flags, summary, h)
		sc.acl, sc.group, sc.since = []string{"@slow", "@scripting"}, "scripting", "2.6.0"
		return sc
	}
	register(
		eval("eval", "2.6.0", "Executes a server-side Lua script.", false, false),
		eval("evalsha", "2.6.0", "Executes a server-side Lua script by SHA1 digest.", true, false),
		eval("eval_ro", "7.0.0", "Executes a read-only server-side Lua script.", false, true),
		eval("evalsha_ro", "7.0.0", "Executes a read-only server-side Lua script by SHA1 digest.", true, true),
		container("script", "A container for Lua scripts management commands.", "scripting",
			scriptSub("load", 3, []string{"noscript", "stale"}, "Loads a server-side Lua script to the script cache.", cmdScriptLoad),
			scriptSub("exists", -3, []string{"noscript"}, "Determines whether server-side Lua scripts exist in the script cache.", cmdScriptExists),
			scriptSub("flush", -2, []string{"noscript"}, "Removes all server-side Lua scripts from the script cache.", cmdScriptFlush),
			scriptSub("kill", 2, []string{"noscript", "allow_busy"}, "Terminates a server-side Lua script during execution.", cmdScriptKill),
		),
	)
}

// scriptsOf returns the server's scripts, made on first use.
func (s *Server) scriptsOf() *command.Scripts {
	if st := s.scripts.Load(); st != nil {
		return st
	}
	known := func(lowerName []byte) bool { return lookup(lowerName) != nil }
	st := command.NewScripts(s.backend, known, s.scriptMem.Load())
	if !s.scripts.CompareAndSwap(nil, st) {
		st.Stop()
		return s.scripts.Load()
	}
	return st
}

// scriptRun is how c's scripts run now.
func (s *Server) scriptRun(c *client) command.Run {
	return command.Run{RESP3: c.memo.RESP3, BusyAfter: time.Duration(s.busyAfter.Load()), Sharded: s.router != nil}
}

// write writes a script's or a transaction's outcome.
func (s *Server) write(c *client, o command.Outcome) {
	switch {
	case o.Err != "":
		c.rep.error(o.Err)
	default:
		if o.Failed {
			c.rep.errors++
		}
		c.rep.conn.WriteRaw(o.Reply)
	}
}

// busyOn reports whether a script that runs past busy-reply-threshold
// holds one of the keys of cmd: the command then answers BUSY.
func (s *Server) busyOn(cmd *entry, args [][]byte) bool {
	st := s.scripts.Load()
	if st == nil || !st.AnyBusy() {
		return false
	}
	first, last, step := cmd.keyRange(args)
	return st.Busy(args, first, last, step)
}

func cmdScriptLoad(s *Server, c *client, args [][]byte) outcome {
	sha, text := s.scriptsOf().Load(args[2])
	if text != "" {
		c.rep.error(text)
		return cmdOK
	}
	c.rep.conn.WriteBulkString(sha)
	return cmdOK
}

func cmdScriptExists(s *Server, c *client, args [][]byte) outcome {
	st := s.scriptsOf()
	c.rep.conn.WriteArray(len(args) - 2)
	for _, a := range args[2:] {
		if st.Exists(a) {
			c.rep.conn.WriteInt(1)
		} else {
			c.rep.conn.WriteInt(0)
		}
	}
	return cmdOK
}

func cmdScriptFlush(s *Server, c *client, args [][]byte) outcome {
	if len(args) > 3 || (len(args) == 3 && !equalFold(args[2], "async") && !equalFold(args[2], "sync")) {
		c.rep.error("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
		return cmdOK
	}
	s.scriptsOf().Flush()
	c.rep.conn.WriteString("OK")
	return cmdOK
}

func cmdScriptKill(s *Server, c *client, _ [][]byte) outcome {
	if text := s.scriptsOf().Kill(); text != "" {
		c.rep.error(text)
		return cmdOK
	}
	c.rep.conn.WriteString("OK")
	return cmdOK
}
