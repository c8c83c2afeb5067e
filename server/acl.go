package server

import (
	"slices"
	"strings"

	"github.com/rlserver/rlserver/acl"
	"github.com/rlserver/rlserver/command"
)

// ACL users (package acl) compiled against the command table: each user's
// command rules become a bitmap indexed by command ID (command.Cmd.ID, one
// for every command and subcommand of the table), so the check on
// every command is one load and one AND, with no allocation.
//
// A container command (CONFIG, CLIENT, RL.CLUSTER, ...) is checked on the
// subcommand being called: `+config|get` allows CONFIG GET only, `+config`
// every CONFIG subcommand. The container's own bit gates only HELP (and a
// container called bare, COMMAND); an unknown subcommand gets its error.
//
// The users are fixed at start (--aclfile); ACL SETUSER, DELUSER, LOAD and
// SAVE are not offered, so the compiled users never change and
// connections read them without locks.

// ParseACL reads an ACL file (acl.Parse) whose command rules name this
// server's commands.
func ParseACL(src []byte, requirePass string) (*acl.ACL, error) {
	return acl.Parse(src, requirePass, func(name string) bool { return command.ByName(name) != nil })
}

// users is an ACL with every user's rules compiled.
type users struct {
	acl   *acl.ACL
	names []string // sorted, for ACL LIST and ACL USERS
	users map[string]*aclUser
}

// aclUser is an ACL user and the commands it may run.
type aclUser struct {
	*acl.User
	allowed []uint64 // bit id set: the command with that id may run
}

func compileACL(a *acl.ACL) *users {
	us := &users{acl: a, names: a.Names(), users: map[string]*aclUser{}}
	for _, n := range us.names {
		us.users[n] = compileUser(a.User(n))
	}
	return us
}

// compileUser applies u's command rules, in order, to the command table.
func compileUser(u *acl.User) *aclUser {
	all := command.All()
	cu := &aclUser{User: u, allowed: make([]uint64, (len(all)+63)/64)}
	for _, r := range u.Rules() {
		switch cat, isCat := strings.CutPrefix(r.Target, "@"); {
		case cat == "all" && isCat:
			var fill uint64
			if r.Allow {
				fill = ^uint64(0)
			}
			for i := range cu.allowed {
				cu.allowed[i] = fill
			}
		case isCat:
			for _, c := range all {
				if slices.Contains(c.ACL, r.Target) {
					cu.set(c, r.Allow)
				}
			}
		default:
			c := command.ByName(r.Target)
			if c == nil {
				continue // not a command of this table: allows nothing
			}
			cu.set(c, r.Allow)
			for _, sc := range c.Subcommands {
				cu.set(sc, r.Allow)
			}
		}
	}
	return cu
}

func (u *aclUser) set(c *command.Cmd, allow bool) {
	if allow {
		u.allowed[c.ID>>6] |= 1 << (c.ID & 63)
	} else {
		u.allowed[c.ID>>6] &^= 1 << (c.ID & 63)
	}
}

// may reports whether u may run c. This is the per-command check.
func (u *aclUser) may(c *command.Cmd) bool {
	return u.allowed[c.ID>>6]&(1<<(c.ID&63)) != 0
}

// mayKeys reports whether every key of cmd in args matches one of u's
// patterns that grants the access cmd needs.
func (u *aclUser) mayKeys(cmd *command.Cmd, args [][]byte) bool {
	for i := range cmd.KeyPositions(args) {
		if !u.MayKey(cmd.KeyPerm, args[i]) {
			return false
		}
	}
	return true
}

// authenticate returns the user that name and pass open, or nil.
func (us *users) authenticate(name, pass []byte) *aclUser {
	if u := us.acl.Authenticate(name, pass); u != nil {
		return us.users[u.Name()]
	}
	return nil
}

func (us *users) defaultUser() *aclUser { return us.users["default"] }

// checkACL is process's permission check for an authenticated user: ""
// when u may run cmd with these keys, else the error reply (counted).
func (s *Server) checkACL(c *client, u *aclUser, cmd *command.Cmd, args [][]byte) string {
	checked := cmd
	if cmd.Subcommands != nil && len(args) > 1 {
		c.lower = appendLower(c.lower[:0], args[1])
		sc := cmd.Sub(c.lower)
		switch {
		case sc != nil:
			checked = sc
		case string(c.lower) != "help":
			// An unknown subcommand gets the container's error, as in
			// Redis (go-redis probes CLIENT MAINT_NOTIFICATIONS).
			return ""
		}
	}
	if !u.may(checked) {
		s.Stats.ACLDeniedCmd.Add(1)
		return command.NoPerm(u.Name(), checked.Name)
	}
	if !u.AllKeys() && cmd.FirstKey > 0 && !u.mayKeys(cmd, args) {
		s.Stats.ACLDeniedKey.Add(1)
		return command.ErrNoPermKey
	}
	return ""
}

// ACL WHOAMI, LIST and USERS: the connection's user and the server's
// (ACL CAT, which reads only the table, is command's).

func cmdACLWhoami(_ *Server, c *client, _ [][]byte) outcome {
	c.rep.conn.WriteBulkString(c.user.Name())
	return cmdOK
}

func cmdACLList(s *Server, c *client, _ [][]byte) outcome {
	c.rep.conn.WriteArray(len(s.acl.names))
	for _, n := range s.acl.names {
		c.rep.conn.WriteBulkString(s.acl.users[n].Describe())
	}
	return cmdOK
}

func cmdACLUsers(s *Server, c *client, _ [][]byte) outcome {
	c.rep.conn.WriteArray(len(s.acl.names))
	for _, n := range s.acl.names {
		c.rep.conn.WriteBulkString(n)
	}
	return cmdOK
}
