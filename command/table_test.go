package command

import (
	"slices"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/acl"
)

func TestCommandTableIsConsistent(t *testing.T) {
	for name, c := range table {
		if name != strings.ToLower(name) || c.Name != name {
			t.Errorf("command %q registered as %q", c.Name, name)
		}
		if c.Arity == 0 {
			t.Errorf("%s: arity 0", name)
		}
		if c.FirstKey > 0 && c.KeyStep == 0 {
			t.Errorf("%s: keys without a step", name)
		}
		if c.Summary == "" || c.Group == "" {
			t.Errorf("%s: no docs", name)
		}
	}
}

func TestACLCategoriesAreKnown(t *testing.T) {
	for _, c := range All() {
		for _, cat := range c.ACL {
			if !strings.HasPrefix(cat, "@") || !acl.IsCategory(cat[1:]) {
				t.Errorf("%s: category %q is not an acl category", c.Name, cat)
			}
		}
		if All()[c.ID] != c {
			t.Errorf("%s: id %d names %s", c.Name, c.ID, All()[c.ID].Name)
		}
	}
}

// TestAdminCommandsAreDangerous pins the categories an application user's
// -@dangerous relies on.
func TestAdminCommandsAreDangerous(t *testing.T) {
	for _, name := range []string{"flushall", "flushdb", "shutdown", "config|get", "save", "bgsave",
		"rl.cluster|join", "rl.cluster|remove", "client|list", "acl|list", "acl|users", "info", "role"} {
		c := ByName(name)
		if c == nil {
			t.Errorf("%s: no such command", name)
			continue
		}
		if !slices.Contains(c.ACL, "@dangerous") {
			t.Errorf("%s: categories %v lack @dangerous", name, c.ACL)
		}
	}
}

// TestPolicyCommandCategories pins what an application user's
// +@ratelimit -@dangerous relies on: it may check and read policies, not
// change them.
func TestPolicyCommandCategories(t *testing.T) {
	for name, want := range map[string]string{
		"rl.policy|set": "@dangerous", "rl.policy|del": "@dangerous", "rl.policy|load": "@dangerous",
		"rl.policy|get": "@ratelimit", "rl.policy|list": "@ratelimit", "rl.check": "@ratelimit",
	} {
		c := ByName(name)
		if c == nil {
			t.Errorf("%s: no such command", name)
			continue
		}
		if !slices.Contains(c.ACL, want) || want == "@dangerous" && !c.HasFlag("write") {
			t.Errorf("%s: categories %v flags %v, want %s", name, c.ACL, c.Flags, want)
		}
	}
}

// TestDecidingCommands pins which commands count as limiter decisions
// (status.Command.Decides): only they get allowed/denied series in the
// metrics; PING, DEL, EXISTS, RL.RESET had them, always 0.
func TestDecidingCommands(t *testing.T) {
	var got []string
	for _, c := range All() {
		if c.Decides() {
			got = append(got, c.Name)
		}
	}
	slices.Sort(got)
	want := []string{"cl.throttle", "gcra", "rl.allow", "rl.check", "rl.fixed", "rl.log", "rl.peek", "rl.shape", "rl.sliding"}
	if !slices.Equal(got, want) {
		t.Errorf("deciding commands %v, want %v", got, want)
	}
}

// TestOneWayToRun: every command runs in exactly one way (Cmd's doc), and
// the ones the edge answers itself are only those that need the
// connection or the server.
func TestOneWayToRun(t *testing.T) {
	var edge []string
	for _, c := range All() {
		if c.Edge() {
			edge = append(edge, c.Name)
		}
		if c.Subcommands != nil && (c.Batch != nil || c.Tiered != nil) {
			t.Errorf("%s: a container that is batched", c.Name)
		}
	}
	slices.Sort(edge)
	want := []string{"acl|list", "acl|users", "acl|whoami", "auth",
		"client|getname", "client|id", "client|info", "client|kill", "client|list", "client|no-evict",
		"client|reply", "client|setinfo", "client|setname", "client|unblock",
		"config|get", "config|resetstat", "config|set", "hello", "info", "quit", "reset", "rl.policy|load", "rl.top"}
	if !slices.Equal(edge, want) {
		t.Errorf("the edge's commands: %v, want %v", edge, want)
	}
}
