// Package acl is rlserver's model of Redis's ACL users: a subset of
// Redis's ACL file syntax, parsed into users that are on or off, have
// passwords (kept only as SHA-256 hashes) or nopass, key patterns with
// read and write permissions, and an ordered list of command rules.
//
// The package knows command names only as strings: Parse asks its caller
// whether a name exists, and the command layer compiles each user's Rules
// into whatever check it runs per command. Rules are applied left to right
// and later rules win, as in Redis: `+@all -flushall` allows everything
// but FLUSHALL.
//
// An ACL is never modified once built, so any number of goroutines read
// it without locks.
package acl

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/rlserver/rlserver/internal/conf"
)

// ACL is a set of users. Build one with Parse or Default.
type ACL struct {
	users map[string]*User
	names []string // sorted, for ACL LIST and ACL USERS
}

// User is one ACL user.
type User struct {
	name      string
	enabled   bool
	nopass    bool
	passwords [][sha256.Size]byte

	allKeys     bool
	keys        []keyPattern
	allChannels bool     // no pub/sub in rlserver: kept for ACL LIST only
	channels    []string // the same

	// rules are the command rules, lower case: a base of +@all or -@all,
	// then the later rules, each target at most once (a later rule on the
	// same command or category replaces it). Applied in order they give
	// the same permissions as every rule the user was given.
	rules []string
}

// Perm is the access a command needs to its keys, or a key pattern grants.
type Perm uint8

// The key permissions: %R~ grants Read, %W~ Write, ~ both.
const (
	Read Perm = 1 << iota
	Write
)

type keyPattern struct {
	pattern string
	perm    Perm
	// prefix is set for the common `literal*` form, matched without the
	// glob matcher.
	prefix string
	isPfx  bool
}

func newKeyPattern(pattern string, perm Perm) keyPattern {
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
	return Glob(p.pattern, key)
}

func (p keyPattern) String() string {
	switch p.perm {
	case Read:
		return "%R~" + p.pattern
	case Write:
		return "%W~" + p.pattern
	}
	return "~" + p.pattern
}

// categories are Redis's ACL categories in ACL CAT's order, then
// rlserver's own: ratelimit, the limiter commands. Categories without an
// rlserver command are accepted in rules and match nothing, so ACL files
// written for Redis load.
var categories = []string{
	"keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
	"bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
	"blocking", "dangerous", "connection", "transaction", "scripting", "ratelimit",
}

// Categories returns the category names (without @) in ACL CAT's order.
func Categories() []string { return slices.Clone(categories) }

// IsCategory reports whether name (lower case, without @) is a category.
func IsCategory(name string) bool { return slices.Contains(categories, name) }

// Default is the ACL without a file: only the default user, with all
// commands and keys, and requirePass as its password ("" for nopass).
func Default(requirePass string) *ACL {
	u := defaultUser()
	if requirePass != "" {
		u.apply(">"+requirePass, nil)
	}
	return &ACL{users: map[string]*User{u.name: u}, names: []string{u.name}}
}

// defaultUser is Redis's default user: on nopass ~* &* +@all.
func defaultUser() *User {
	u := newUser("default")
	for _, r := range []string{"on", "nopass", "~*", "&*", "+@all"} {
		if err := u.apply(r, nil); err != nil {
			panic("acl: default user: " + err.Error())
		}
	}
	return u
}

func newUser(name string) *User {
	return &User{name: name, rules: []string{"-@all"}}
}

// Parse reads users in Redis's ACL file syntax, one per line:
//
//	user <name> [rule ...]
//
// Blank lines and lines starting with # are skipped; a line is split into
// arguments as Redis splits redis.conf's lines (package internal/conf:
// "double" and 'single' quotes, escapes). A user not mentioned does not exist, except the
// default user, which is Redis's (on nopass ~* &* +@all) when the file has
// no line for it; requirePass, when set, becomes its password then, and is
// refused when the file defines the default user itself (one of the two
// would silently win). known reports whether a command name (lower case,
// container|sub for a subcommand) exists; nil accepts every name. The
// error names the line and the problem.
func Parse(src []byte, requirePass string, known func(name string) bool) (*ACL, error) {
	a := &ACL{users: map[string]*User{}}
	lineOf := map[string]int{}
	for i, line := range bytes.Split(src, []byte("\n")) {
		n := i + 1
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		argv, err := conf.Split(string(line))
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if len(argv) == 0 {
			continue // a NUL ends a line, as in Redis
		}
		if !strings.EqualFold(argv[0], "user") {
			return nil, fmt.Errorf("line %d: expected 'user <name> [rules...]', got %q", n, Sanitize([]byte(argv[0]), 64))
		}
		if len(argv) < 2 {
			return nil, fmt.Errorf("line %d: a user needs a name", n)
		}
		name := argv[1]
		if !validUserName(name) {
			return nil, fmt.Errorf("line %d: invalid user name %q: use printable characters, no spaces", n, Sanitize([]byte(argv[1]), 64))
		}
		if first, dup := lineOf[name]; dup {
			return nil, fmt.Errorf("line %d: user '%s' is already defined on line %d", n, name, first)
		}
		lineOf[name] = n
		u := newUser(name)
		for _, r := range argv[2:] {
			if err := u.apply(r, known); err != nil {
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
			u.apply(">"+requirePass, nil)
		}
		a.users[u.name] = u
	}
	for name := range a.users {
		a.names = append(a.names, name)
	}
	slices.Sort(a.names)
	return a, nil
}

// validUserName: printable ASCII, no spaces, as Redis's client names.
func validUserName(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '!' || s[i] > '~' {
			return false
		}
	}
	return s != ""
}

// Sanitize returns at most n bytes of b with control characters and DEL
// as spaces, for quoting untrusted input inside a one-line error or log
// line. The command layer uses it for its wire error texts too.
func Sanitize(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	out := make([]byte, len(b))
	for i, c := range b {
		if c < ' ' || c == 0x7f {
			c = ' '
		}
		out[i] = c
	}
	return string(out)
}

// apply applies one rule. Rule keywords, command names and categories are
// case-insensitive; passwords and patterns are not.
func (u *User) apply(rule string, known func(string) bool) error {
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
		u.rules = []string{"+@all"}
		return nil
	case "nocommands", "-@all":
		u.rules = []string{"-@all"}
		return nil
	case "reset":
		*u = *newUser(u.name)
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
		return u.commandRule(lower, known)
	}
	return fmt.Errorf("unknown rule '%s'", rule)
}

func (u *User) addPassword(sum [sha256.Size]byte) {
	u.nopass = false
	if !slices.Contains(u.passwords, sum) {
		u.passwords = append(u.passwords, sum)
	}
}

func (u *User) removePassword(sum [sha256.Size]byte) bool {
	i := slices.Index(u.passwords, sum)
	if i < 0 {
		return false
	}
	u.passwords = slices.Delete(u.passwords, i, i+1)
	return true
}

// addKeyPattern adds ~pattern (read and write), %R~pattern (read) or
// %W~pattern (write).
func (u *User) addKeyPattern(rule string) error {
	perm := Read | Write
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
				perm |= Read
			case 'W':
				perm |= Write
			default:
				return fmt.Errorf("'%s': key permissions are R, W or RW", rule)
			}
		}
		pat = rule[i+1:]
	}
	if u.allKeys {
		return fmt.Errorf("'%s': a key pattern after '~*' (or allkeys) has no effect; use resetkeys first", rule)
	}
	if pat == "*" && perm == Read|Write {
		u.allKeys = true
		u.keys = nil
		return nil
	}
	u.keys = append(u.keys, newKeyPattern(pat, perm))
	return nil
}

// commandRule records +name, -name, +name|sub, -name|sub, +@category or
// -@category (rule lower-cased).
func (u *User) commandRule(rule string, known func(string) bool) error {
	target := rule[1:]
	if cat, ok := strings.CutPrefix(target, "@"); ok {
		if !IsCategory(cat) {
			return fmt.Errorf("'%s': unknown category '@%s' (see ACL CAT)", rule, cat)
		}
	} else if known != nil && !known(target) {
		return fmt.Errorf("'%s': unknown command '%s'", rule, target)
	}
	u.rules = slices.DeleteFunc(u.rules, func(r string) bool { return r[1:] == target })
	u.rules = append(u.rules, rule)
	return nil
}

// Rule is one command rule: Allow for +, else -; Target is "@all", a
// category as "@name", a command, or a subcommand as "container|sub",
// lower case. A command rule covers the command's subcommands too.
type Rule struct {
	Allow  bool
	Target string
}

// Rules returns u's command rules in order: the first is +@all or -@all,
// and applying them left to right (a later rule overriding an earlier one
// on the same commands) gives u's permissions.
func (u *User) Rules() []Rule {
	out := make([]Rule, len(u.rules))
	for i, r := range u.rules {
		out[i] = Rule{Allow: r[0] == '+', Target: r[1:]}
	}
	return out
}

// Name is the user's name.
func (u *User) Name() string { return u.name }

// NoPass reports whether u opens with any password.
func (u *User) NoPass() bool { return u.nopass }

// AllKeys reports whether u may access every key for reading and writing.
func (u *User) AllKeys() bool { return u.allKeys }

// MayKey reports whether one of u's key patterns grants the access need
// to key. It is false for every key when u has AllKeys and no pattern:
// check AllKeys first.
func (u *User) MayKey(need Perm, key []byte) bool {
	for i := range u.keys {
		if p := &u.keys[i]; p.perm&need == need && p.match(key) {
			return true
		}
	}
	return false
}

// CheckPassword reports whether pass opens u: any password for nopass,
// else one of its passwords. A user that is off opens with none.
func (u *User) CheckPassword(pass []byte) bool {
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

// Describe is the user's line in ACL LIST, in Redis's format:
// user <name> on|off nopass|#<sha256>... <key patterns> <channels> <command rules>.
// Parse reads it back to the same user.
func (u *User) Describe() string {
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

// quoteRule writes a rule so Parse reads it back as one argument:
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

// Names returns the user names, sorted. The slice must not be modified.
func (a *ACL) Names() []string { return a.names }

// User returns the user called name, or nil.
func (a *ACL) User(name string) *User { return a.users[name] }

// DefaultUser returns the default user, which every ACL has.
func (a *ACL) DefaultUser() *User { return a.users["default"] }

// Authenticate returns the user that name and pass open, or nil.
func (a *ACL) Authenticate(name, pass []byte) *User {
	u := a.users[string(name)]
	if u == nil || !u.CheckPassword(pass) {
		return nil
	}
	return u
}

// Open reports whether connections start authenticated as the default
// user: it is on and needs no password.
func (a *ACL) Open() bool {
	u := a.DefaultUser()
	return u.enabled && u.nopass
}
