package command

import (
	"context"
	"slices"
	"strings"

	"github.com/rlserver/rlserver/acl"
)

// The server's own commands: the keyspace's size and flush, and the ones
// that read or change the server (INFO, CONFIG, the ACL users, RL.TOP),
// whose handlers the edge keeps (Cmd.Edge).

func init() {
	adminFlags := []string{"admin", "noscript", "loading", "stale"}
	adminACL := []string{"@admin", "@slow", "@dangerous"}
	config := container("config", "A container for server configuration commands.", "server",
		&Cmd{Name: "config|get", Arity: -3, Flags: adminFlags, ACL: adminACL,
			Summary: "Returns the effective values of configuration parameters.", Group: "server", Since: "2.0.0"},
		&Cmd{Name: "config|set", Arity: -4, Flags: adminFlags, ACL: adminACL,
			Summary: "Sets configuration parameters at run time: log-level, maxclients, max-key-len, proto-max-bulk-len, max-args, max-inline-len, save-interval, maxmemory, maxmemory-policy, busy-reply-threshold, script-memory-limit.", Group: "server", Since: "2.0.0"},
		&Cmd{Name: "config|resetstat", Arity: 2, Flags: adminFlags, ACL: adminACL,
			Summary: "Resets the server's statistics that INFO reports (the /metrics counters keep counting).", Group: "server", Since: "2.0.0"},
	)
	config.Flags = []string{"admin"}
	register(
		&Cmd{Name: "dbsize", Arity: 1, Flags: []string{"readonly", "fast"}, ACL: []string{"@keyspace", "@read", "@fast"},
			Summary: "Returns the number of keys: limiter state and data keys.", Group: "server", Since: "1.0.0", Run: dbsize},
		&Cmd{Name: "flushall", Arity: -1, Flags: []string{"write"}, ACL: []string{"@keyspace", "@write", "@slow", "@dangerous"},
			Summary: "Removes all keys.", Group: "server", Since: "1.0.0", Run: flushAll},
		&Cmd{Name: "flushdb", Arity: -1, Flags: []string{"write"}, ACL: []string{"@keyspace", "@write", "@slow", "@dangerous"},
			Summary: "Removes all keys of the current database (the only one).", Group: "server", Since: "1.0.0", Run: flushAll},
		&Cmd{Name: "info", Arity: -1, Flags: []string{"loading", "stale"}, ACL: []string{"@slow", "@dangerous"},
			Summary: "Returns information and statistics about the server.", Group: "server", Since: "1.0.0"},
		config,
		container("acl", "A container for Access List Control commands.", "server",
			&Cmd{Name: "acl|cat", Arity: -2, Flags: []string{"noscript", "loading", "stale"}, ACL: []string{"@slow"},
				Summary: "Lists the ACL categories, or the commands inside a category.", Group: "server", Since: "6.0.0", Run: aclCat},
			&Cmd{Name: "acl|whoami", Arity: 2, Flags: []string{"noscript", "loading", "stale"}, ACL: []string{"@slow"},
				Summary: "Returns the authenticated username of the current connection.", Group: "server", Since: "6.0.0"},
			&Cmd{Name: "acl|list", Arity: 2, Flags: adminFlags, ACL: adminACL,
				Summary: "Dumps the effective rules in ACL file format.", Group: "server", Since: "6.0.0"},
			&Cmd{Name: "acl|users", Arity: 2, Flags: adminFlags, ACL: adminACL,
				Summary: "Lists all ACL users.", Group: "server", Since: "6.0.0"},
		),
		&Cmd{Name: "rl.top", Arity: -1, Flags: []string{"readonly", "admin"}, ACL: []string{"@admin", "@slow", "@ratelimit"},
			Summary: "Lists the keys denied most in the recent past: [[key, denials], ...], most first (denials decay with a one-minute half-life).",
			Group:   "ratelimit", Since: "0.7.0"},
	)
}

func dbsize(x *Call, _ [][]byte) {
	n, err := x.Env.Backend.Len(context.Background())
	if err != nil {
		x.fail(Text(err))
		return
	}
	x.W.Int(int64(n))
}

func flushAll(x *Call, args [][]byte) {
	if len(args) > 2 || (len(args) == 2 && !EqualFold(args[1], "sync") && !EqualFold(args[1], "async")) {
		x.fail(ErrSyntax)
		return
	}
	if err := x.Env.Backend.Flush(context.Background()); err != nil {
		x.fail(Text(err))
		return
	}
	x.W.OK()
}

// aclCat: ACL CAT [category]: the categories, or the commands of one
// (subcommands as container|sub; a container's own bit gates only HELP).
func aclCat(x *Call, args [][]byte) {
	if len(args) > 3 {
		x.fail(WrongArity("acl|cat"))
		return
	}
	if len(args) == 2 {
		cats := acl.Categories()
		x.W.Array(len(cats))
		for _, cat := range cats {
			x.W.BulkString(cat)
		}
		return
	}
	cat := strings.TrimPrefix(strings.ToLower(string(args[2])), "@")
	if !acl.IsCategory(cat) {
		x.fail(unknownCategory(args[2]))
		return
	}
	var names []string
	for _, cmd := range byID {
		if cmd.Subcommands == nil && slices.Contains(cmd.ACL, "@"+cat) {
			names = append(names, cmd.Name)
		}
	}
	slices.Sort(names)
	x.W.Array(len(names))
	for _, n := range names {
		x.W.BulkString(n)
	}
}
