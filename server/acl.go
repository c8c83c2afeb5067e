package server

import (
	"slices"
	"strings"

	"github.com/rlserver/rlserver/acl"
)

// ACL users (package acl) compiled against the command table: each user's
// command rules become a bitmap indexed by command id (table.go assigns
// one to every command and subcommand at registration), so the check on
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
	return acl.Parse(src, requirePass, func(name string) bool { return commandByName(name) != nil })
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
	cu := &aclUser{User: u, allowed: make([]uint64, (len(byID)+63)/64)}
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
			for _, c := range byID {
				if slices.Contains(c.acl, r.Target) {
					cu.set(c, r.Allow)
				}
			}
		default:
			c := commandByName(r.Target)
			if c == nil {
				continue // not a command of this table: allows nothing
			}
			cu.set(c, r.Allow)
			for _, sc := range c.subcommands {
				cu.set(sc, r.Allow)
			}
		}
	}
	return cu
}

// commandByName finds a command or, as container|sub, a subcommand.
func commandByName(name string) *entry {
	parent, sub, isSub := strings.Cut(name, "|")
	c := commands[parent]
	if c == nil || !isSub {
		return c
	}
	return c.lookupSub([]byte(sub))
}

func (u *aclUser) set(c *entry, allow bool) {
	if allow {
		u.allowed[c.id>>6] |= 1 << (c.id & 63)
	} else {
		u.allowed[c.id>>6] &^= 1 << (c.id & 63)
	}
}

// may reports whether u may run c. This is the per-command check.
func (u *aclUser) may(c *entry) bool {
	return u.allowed[c.id>>6]&(1<<(c.id&63)) != 0
}

// mayKeys reports whether every key of cmd in args matches one of u's
// patterns that grants the access cmd needs.
func (u *aclUser) mayKeys(cmd *entry, args [][]byte) bool {
	first, last, step := cmd.keyRange(args)
	for i := first; i <= last && i < len(args); i += step {
		if !u.MayKey(cmd.keyPerm, args[i]) {
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
func (s *Server) checkACL(c *client, u *aclUser, cmd *entry, args [][]byte) string {
	checked := cmd
	if cmd.subcommands != nil && len(args) > 1 {
		c.lower = appendLower(c.lower[:0], args[1])
		sc := cmd.lookupSub(c.lower)
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
		return noPerm(u, checked)
	}
	if !u.AllKeys() && cmd.firstKey > 0 && !u.mayKeys(cmd, args) {
		s.Stats.ACLDeniedKey.Add(1)
		return errNoPermKey
	}
	return ""
}

// ACL

func init() {
	register(container("acl", "A container for Access List Control commands.", "server",
		&entry{name: "acl|cat", arity: -2, flags: []string{"noscript", "loading", "stale"}, acl: []string{"@slow"},
			summary: "Lists the ACL categories, or the commands inside a category.", group: "server", since: "6.0.0", handler: cmdACLCat},
		&entry{name: "acl|whoami", arity: 2, flags: []string{"noscript", "loading", "stale"}, acl: []string{"@slow"},
			summary: "Returns the authenticated username of the current connection.", group: "server", since: "6.0.0", handler: cmdACLWhoami},
		&entry{name: "acl|list", arity: 2, flags: []string{"admin", "noscript", "loading", "stale"}, acl: []string{"@admin", "@slow", "@dangerous"},
			summary: "Dumps the effective rules in ACL file format.", group: "server", since: "6.0.0", handler: cmdACLList},
		&entry{name: "acl|users", arity: 2, flags: []string{"admin", "noscript", "loading", "stale"}, acl: []string{"@admin", "@slow", "@dangerous"},
			summary: "Lists all ACL users.", group: "server", since: "6.0.0", handler: cmdACLUsers},
	))
}

func cmdACLCat(_ *Server, c *client, args [][]byte) outcome {
	if len(args) > 3 {
		c.rep.error(wrongArity("acl|cat"))
		return cmdOK
	}
	if len(args) == 2 {
		cats := acl.Categories()
		c.rep.conn.WriteArray(len(cats))
		for _, cat := range cats {
			c.rep.conn.WriteBulkString(cat)
		}
		return cmdOK
	}
	cat := strings.TrimPrefix(strings.ToLower(string(args[2])), "@")
	if !acl.IsCategory(cat) {
		c.rep.error(unknownCategory(args[2]))
		return cmdOK
	}
	var names []string
	for _, cmd := range byID {
		// A container's own bit gates only HELP: list its subcommands.
		if cmd.subcommands == nil && slices.Contains(cmd.acl, "@"+cat) {
			names = append(names, cmd.name)
		}
	}
	slices.Sort(names)
	c.rep.conn.WriteArray(len(names))
	for _, n := range names {
		c.rep.conn.WriteBulkString(n)
	}
	return cmdOK
}

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
