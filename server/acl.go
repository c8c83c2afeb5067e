package server

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/rlserver/rlserver/resp"
)

// ACL users: a subset of Redis's ACL model. A user is on or off, has
// passwords (kept only as SHA-256 hashes) or nopass, a set of commands it
// may run, and key patterns its commands' keys must match.
//
// Permissions are a bitmap per user indexed by command id (table.go
// assigns one to every command and subcommand at registration), so the
// check on every command is one load and one AND, with no allocation.
// Rules are applied left to right and later rules win, as in Redis:
// `+@all -flushall` allows everything but FLUSHALL.
//
// A container command (CONFIG, CLIENT, RL.CLUSTER, ...) is checked on the
// subcommand being called: `+config|get` allows CONFIG GET only, `+config`
// every CONFIG subcommand. The container's own bit gates only HELP (and a
// container called bare, COMMAND); an unknown subcommand gets its error.
//
// The users are fixed at start (--aclfile); ACL SETUSER, DELUSER, LOAD and
// SAVE are not offered, so an ACL is never modified once built and
// connections read it without locks.

// ACL is a set of users. Build one with ParseACL or DefaultACL.
type ACL struct {
	users map[string]*aclUser
	names []string // sorted, for ACL LIST and ACL USERS
}

type aclUser struct {
	name      string
	enabled   bool
	nopass    bool
	passwords [][sha256.Size]byte
	allowed   []uint64 // bit id set: the command with that id may run

	allKeys     bool
	keys        []keyPattern
	allChannels bool     // no pub/sub in rlserver: kept for ACL LIST only
	channels    []string // the same

	// rules are the command rules that rebuild allowed, for ACL LIST: a
	// base of +@all or -@all, then the later rules, each target at most
	// once (a later rule on the same command or category replaces it).
	rules []string
}

// keyPerm is the access a command needs to its keys, or a key pattern grants.
type keyPerm uint8

const (
	keyRead keyPerm = 1 << iota
	keyWrite
)

type keyPattern struct {
	pattern string
	perm    keyPerm
	// prefix is set for the common `literal*` form, matched without the
	// glob matcher.
	prefix string
	isPfx  bool
}

func newKeyPattern(pattern string, perm keyPerm) keyPattern {
	p := keyPattern{pattern: pattern, perm: perm}
	if lit, ok := strings.CutSuffix(pattern, "*"); ok && !strings.ContainsAny(lit, "*?[\\") {
		p.prefix, p.isPfx = lit, true
	}
	return p
}

func (p *keyPattern) match(key []byte) bool {
	if p.isPfx {
		return len(key) >= len(p.prefix) && string(key[:len(p.prefix)]) == p.prefix
	}
	return globMatch(p.pattern, key)
}

func (p keyPattern) String() string {
	switch p.perm {
	case keyRead:
		return "%R~" + p.pattern
	case keyWrite:
		return "%W~" + p.pattern
	}
	return "~" + p.pattern
}

// aclCategories are Redis's ACL categories in ACL CAT's order, then
// rlserver's own: @ratelimit, the limiter commands. Categories without an
// rlserver command are accepted in rules and match nothing, so ACL files
// written for Redis load.
var aclCategories = []string{
	"keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
	"bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
	"blocking", "dangerous", "connection", "transaction", "scripting", "ratelimit",
}

// DefaultACL is the ACL without a file: only the default user, with all
// commands and keys, and requirePass as its password ("" for nopass).
func DefaultACL(requirePass string) *ACL {
	u := defaultUser()
	if requirePass != "" {
		u.apply(">" + requirePass)
	}
	return &ACL{users: map[string]*aclUser{u.name: u}, names: []string{u.name}}
}

// defaultUser is Redis's default user: on nopass ~* &* +@all.
func defaultUser() *aclUser {
	u := newACLUser("default")
	for _, r := range []string{"on", "nopass", "~*", "&*", "+@all"} {
		if err := u.apply(r); err != nil {
			panic("resp: default user: " + err.Error())
		}
	}
	return u
}

func newACLUser(name string) *aclUser {
	return &aclUser{name: name, allowed: make([]uint64, (len(byID)+63)/64), rules: []string{"-@all"}}
}

// ParseACL reads users in Redis's ACL file syntax, one per line:
//
//	user <name> [rule ...]
//
// Blank lines and lines starting with # are skipped; arguments may be
// quoted as in redis-cli. A user not mentioned does not exist, except the
// default user, which is Redis's (on nopass ~* &* +@all) when the file has
// no line for it; requirePass, when set, becomes its password then, and is
// refused when the file defines the default user itself (one of the two
// would silently win). The error names the line and the problem.
func ParseACL(src []byte, requirePass string) (*ACL, error) {
	a := &ACL{users: map[string]*aclUser{}}
	lineOf := map[string]int{}
	for i, line := range bytes.Split(src, []byte("\n")) {
		n := i + 1
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		args, ok := resp.SplitArgs(line)
		if !ok {
			return nil, fmt.Errorf("line %d: unbalanced quotes", n)
		}
		if !strings.EqualFold(string(args[0]), "user") {
			return nil, fmt.Errorf("line %d: expected 'user <name> [rules...]', got %q", n, sanitize(args[0], 64))
		}
		if len(args) < 2 {
			return nil, fmt.Errorf("line %d: a user needs a name", n)
		}
		name := string(args[1])
		if !validUserName(name) {
			return nil, fmt.Errorf("line %d: invalid user name %q: use printable characters, no spaces", n, sanitize(args[1], 64))
		}
		if first, dup := lineOf[name]; dup {
			return nil, fmt.Errorf("line %d: user '%s' is already defined on line %d", n, name, first)
		}
		lineOf[name] = n
		u := newACLUser(name)
		for _, r := range args[2:] {
			if err := u.apply(string(r)); err != nil {
				return nil, fmt.Errorf("line %d: user '%s': %v", n, name, err)
			}
		}
		a.users[name] = u
	}
	if _, ok := a.users["default"]; ok {
		if requirePass != "" {
			return nil, fmt.Errorf("line %d: the file defines the default user, whose password requirepass would also set: give it its password in the file (user default on >password ...)", lineOf["default"])
		}
	} else {
		u := defaultUser()
		if requirePass != "" {
			u.apply(">" + requirePass)
		}
		a.users[u.name] = u
	}
	for name := range a.users {
		a.names = append(a.names, name)
	}
	slices.Sort(a.names)
	return a, nil
}

func validUserName(s string) bool {
	return s != "" && validClientName([]byte(s))
}

// apply applies one rule. Rule keywords, command names and categories are
// case-insensitive; passwords and patterns are not.
func (u *aclUser) apply(rule string) error {
	if rule == "" {
		return fmt.Errorf("empty rule")
	}
	lower := strings.ToLower(rule)
	switch lower {
	case "on":
		u.enabled = true
		return nil
	case "off":
		u.enabled = false
		return nil
	case "nopass":
		u.nopass = true
		u.passwords = nil
		return nil
	case "resetpass":
		u.nopass = false
		u.passwords = nil
		return nil
	case "allkeys", "~*":
		u.allKeys = true
		u.keys = nil
		return nil
	case "resetkeys":
		u.allKeys = false
		u.keys = nil
		return nil
	case "allchannels", "&*":
		u.allChannels = true
		u.channels = nil
		return nil
	case "resetchannels":
		u.allChannels = false
		u.channels = nil
		return nil
	case "allcommands", "+@all":
		for i := range u.allowed {
			u.allowed[i] = ^uint64(0)
		}
		u.rules = []string{"+@all"}
		return nil
	case "nocommands", "-@all":
		clear(u.allowed)
		u.rules = []string{"-@all"}
		return nil
	case "reset":
		*u = *newACLUser(u.name)
		return nil
	case "sanitize-payload", "skip-sanitize-payload", "clearselectors":
		return nil // no payloads to sanitize and no selectors: nothing to do
	}
	switch {
	case rule[0] == '>':
		u.addPassword(sha256.Sum256([]byte(rule[1:])))
		return nil
	case rule[0] == '<':
		if !u.removePassword(sha256.Sum256([]byte(rule[1:]))) {
			return fmt.Errorf("'<...': the password to remove is not one of the user's")
		}
		return nil
	case rule[0] == '#' || rule[0] == '!':
		h, err := hex.DecodeString(rule[1:])
		if err != nil || len(h) != sha256.Size {
			return fmt.Errorf("'%c...': a password hash is 64 hexadecimal digits (SHA-256)", rule[0])
		}
		sum := [sha256.Size]byte(h)
		if rule[0] == '#' {
			u.addPassword(sum)
		} else if !u.removePassword(sum) {
			return fmt.Errorf("'!%s': the hash to remove is not one of the user's", rule[1:])
		}
		return nil
	case rule[0] == '~' || strings.HasPrefix(rule, "%"):
		return u.addKeyPattern(rule)
	case rule[0] == '&':
		if u.allChannels {
			return fmt.Errorf("'%s': a channel pattern after '&*' (or allchannels) has no effect; use resetchannels first", rule)
		}
		u.channels = append(u.channels, rule[1:])
		return nil
	case rule[0] == '(':
		return fmt.Errorf("'%s': selectors are not supported", rule)
	case len(lower) > 1 && (lower[0] == '+' || lower[0] == '-'):
		return u.commandRule(lower)
	}
	return fmt.Errorf("unknown rule '%s'", rule)
}

func (u *aclUser) addPassword(sum [sha256.Size]byte) {
	u.nopass = false
	if !slices.Contains(u.passwords, sum) {
		u.passwords = append(u.passwords, sum)
	}
}

func (u *aclUser) removePassword(sum [sha256.Size]byte) bool {
	i := slices.Index(u.passwords, sum)
	if i < 0 {
		return false
	}
	u.passwords = slices.Delete(u.passwords, i, i+1)
	return true
}

// addKeyPattern adds ~pattern (read and write), %R~pattern (read) or
// %W~pattern (write).
func (u *aclUser) addKeyPattern(rule string) error {
	perm := keyRead | keyWrite
	pat := rule[1:]
	if rule[0] == '%' {
		i := strings.IndexByte(rule, '~')
		if i < 2 {
			return fmt.Errorf("'%s': expected %%R~, %%W~ or %%RW~ before the key pattern", rule)
		}
		perm = 0
		for _, c := range strings.ToUpper(rule[1:i]) {
			switch c {
			case 'R':
				perm |= keyRead
			case 'W':
				perm |= keyWrite
			default:
				return fmt.Errorf("'%s': key permissions are R, W or RW", rule)
			}
		}
		pat = rule[i+1:]
	}
	if u.allKeys {
		return fmt.Errorf("'%s': a key pattern after '~*' (or allkeys) has no effect; use resetkeys first", rule)
	}
	if pat == "*" && perm == keyRead|keyWrite {
		u.allKeys = true
		u.keys = nil
		return nil
	}
	u.keys = append(u.keys, newKeyPattern(pat, perm))
	return nil
}

// commandRule applies +name, -name, +name|sub, -name|sub, +@category or
// -@category (rule lower-cased).
func (u *aclUser) commandRule(rule string) error {
	allow := rule[0] == '+'
	target := rule[1:]
	if cat, ok := strings.CutPrefix(target, "@"); ok {
		if !slices.Contains(aclCategories, cat) {
			return fmt.Errorf("'%s': unknown category '@%s' (see ACL CAT)", rule, cat)
		}
		for _, c := range byID {
			if slices.Contains(c.acl, target) {
				u.set(c, allow)
			}
		}
	} else {
		c := commandByName(target)
		if c == nil {
			return fmt.Errorf("'%s': unknown command '%s'", rule, target)
		}
		u.set(c, allow)
		for _, sc := range c.subcommands {
			u.set(sc, allow)
		}
	}
	u.rules = slices.DeleteFunc(u.rules, func(r string) bool { return r[1:] == target })
	u.rules = append(u.rules, rule)
	return nil
}

// commandByName finds a command or, as container|sub, a subcommand.
func commandByName(name string) *command {
	parent, sub, isSub := strings.Cut(name, "|")
	c := commands[parent]
	if c == nil || !isSub {
		return c
	}
	return c.lookupSub([]byte(sub))
}

func (u *aclUser) set(c *command, allow bool) {
	if allow {
		u.allowed[c.id>>6] |= 1 << (c.id & 63)
	} else {
		u.allowed[c.id>>6] &^= 1 << (c.id & 63)
	}
}

// may reports whether u may run c. This is the per-command check.
func (u *aclUser) may(c *command) bool {
	return u.allowed[c.id>>6]&(1<<(c.id&63)) != 0
}

// mayKeys reports whether every key of cmd in args matches one of u's
// patterns that grants the access cmd needs.
func (u *aclUser) mayKeys(cmd *command, args [][]byte) bool {
	first, last, step := cmd.keyRange(args)
	for i := first; i <= last && i < len(args); i += step {
		if !u.mayKey(cmd.keyPerm, args[i]) {
			return false
		}
	}
	return true
}

func (u *aclUser) mayKey(need keyPerm, key []byte) bool {
	for i := range u.keys {
		if p := &u.keys[i]; p.perm&need == need && p.match(key) {
			return true
		}
	}
	return false
}

// checkPassword reports whether pass opens u: any password for nopass,
// else one of its passwords. A user that is off opens with none.
func (u *aclUser) checkPassword(pass []byte) bool {
	if !u.enabled {
		return false
	}
	if u.nopass {
		return true
	}
	sum := sha256.Sum256(pass)
	ok := 0
	for i := range u.passwords {
		ok |= subtle.ConstantTimeCompare(sum[:], u.passwords[i][:])
	}
	return ok == 1
}

// describe is the user's line in ACL LIST, in Redis's format:
// user <name> on|off nopass|#<sha256>... <key patterns> <channels> <command rules>.
func (u *aclUser) describe() string {
	var b strings.Builder
	b.WriteString("user " + u.name)
	if u.enabled {
		b.WriteString(" on")
	} else {
		b.WriteString(" off")
	}
	if u.nopass {
		b.WriteString(" nopass")
	}
	for _, p := range u.passwords {
		b.WriteString(" #" + hex.EncodeToString(p[:]))
	}
	if u.allKeys {
		b.WriteString(" ~*")
	}
	for _, p := range u.keys {
		b.WriteString(" " + quoteRule(p.String()))
	}
	if u.allChannels {
		b.WriteString(" &*")
	} else {
		b.WriteString(" resetchannels")
		for _, p := range u.channels {
			b.WriteString(" " + quoteRule("&"+p))
		}
	}
	for _, r := range u.rules {
		b.WriteString(" " + r)
	}
	return b.String()
}

// quoteRule writes a rule so ParseACL reads it back as one argument:
// as is when it is printable ASCII without spaces or quotes, else in
// double quotes with \xHH escapes, as redis-cli reads them.
func quoteRule(r string) string {
	plain := r != ""
	for i := 0; i < len(r) && plain; i++ {
		plain = r[i] > ' ' && r[i] <= '~' && r[i] != '"' && r[i] != '\''
	}
	if plain {
		return r
	}
	const hexDigits = "0123456789abcdef"
	b := []byte{'"'}
	for i := 0; i < len(r); i++ {
		switch c := r[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < ' ' || c > '~':
			b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
		default:
			b = append(b, c)
		}
	}
	return string(append(b, '"'))
}

// authenticate returns the user that name and pass open, or nil.
func (a *ACL) authenticate(name, pass []byte) *aclUser {
	u := a.users[string(name)]
	if u == nil || !u.checkPassword(pass) {
		return nil
	}
	return u
}

func (a *ACL) defaultUser() *aclUser { return a.users["default"] }

// open reports whether connections start authenticated as the default
// user: it is on and needs no password.
func (a *ACL) open() bool {
	u := a.defaultUser()
	return u.enabled && u.nopass
}

// checkACL is process's permission check for an authenticated user: ""
// when u may run cmd with these keys, else the error reply (counted).
func (s *Server) checkACL(c *client, u *aclUser, cmd *command, args [][]byte) string {
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
	if !u.allKeys && cmd.firstKey > 0 && !u.mayKeys(cmd, args) {
		s.Stats.ACLDeniedKey.Add(1)
		return errNoPermKey
	}
	return ""
}

// ACL

func init() {
	register(container("acl", "A container for Access List Control commands.", "server",
		&command{name: "acl|cat", arity: -2, flags: []string{"noscript", "loading", "stale"}, acl: []string{"@slow"},
			summary: "Lists the ACL categories, or the commands inside a category.", group: "server", since: "6.0.0", handler: cmdACLCat},
		&command{name: "acl|whoami", arity: 2, flags: []string{"noscript", "loading", "stale"}, acl: []string{"@slow"},
			summary: "Returns the authenticated username of the current connection.", group: "server", since: "6.0.0", handler: cmdACLWhoami},
		&command{name: "acl|list", arity: 2, flags: []string{"admin", "noscript", "loading", "stale"}, acl: []string{"@admin", "@slow", "@dangerous"},
			summary: "Dumps the effective rules in ACL file format.", group: "server", since: "6.0.0", handler: cmdACLList},
		&command{name: "acl|users", arity: 2, flags: []string{"admin", "noscript", "loading", "stale"}, acl: []string{"@admin", "@slow", "@dangerous"},
			summary: "Lists all ACL users.", group: "server", since: "6.0.0", handler: cmdACLUsers},
	))
}

func cmdACLCat(_ *Server, c *client, args [][]byte) outcome {
	if len(args) > 3 {
		c.rep.error(wrongArity("acl|cat"))
		return cmdOK
	}
	if len(args) == 2 {
		c.rep.conn.WriteArray(len(aclCategories))
		for _, cat := range aclCategories {
			c.rep.conn.WriteBulkString(cat)
		}
		return cmdOK
	}
	cat := strings.TrimPrefix(strings.ToLower(string(args[2])), "@")
	if !slices.Contains(aclCategories, cat) {
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
	c.rep.conn.WriteBulkString(c.user.name)
	return cmdOK
}

func cmdACLList(s *Server, c *client, _ [][]byte) outcome {
	c.rep.conn.WriteArray(len(s.acl.names))
	for _, n := range s.acl.names {
		c.rep.conn.WriteBulkString(s.acl.users[n].describe())
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
