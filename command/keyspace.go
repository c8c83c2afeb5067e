package command

import (
	"context"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
)

// OBJECT and MEMORY: containers whose key subcommands run kv's "object"
// and "memory" commands on the key's shard (through the Raft log in a
// cluster, as every data command), and MEMORY STATS and DOCTOR, answered
// from the backend's key count.

func init() {
	objSpec, _ := kv.Lookup([]byte("object"))
	memSpec, _ := kv.Lookup([]byte("memory"))
	keySub := func(spec *kv.Spec, parent, name string, arity int, since, summary string) *Cmd {
		c := &Cmd{Name: parent + "|" + name, Arity: arity, Flags: []string{"readonly"},
			ACL: []string{"@keyspace", "@read", "@slow"}, FirstKey: 2, LastKey: 2, KeyStep: 1,
			Summary: summary, Group: "generic", Since: since,
			Run: func(x *Call, args [][]byte) { runKV(x, spec, args) }}
		if parent == "memory" {
			c.ACL = []string{"@read", "@slow"}
			c.Group = "server"
		}
		return c
	}
	help := func(spec *kv.Spec, parent string) *Cmd {
		return &Cmd{Name: parent + "|help", Arity: 2, Flags: []string{"loading", "stale"}, ACL: []string{"@slow"},
			Summary: "Show helpful text about the different subcommands", Group: "generic", Since: "6.2.0",
			Run: func(x *Call, args [][]byte) { runKV(x, spec, args) }}
	}
	object := container("object", "A container for object introspection commands", "generic",
		keySub(objSpec, "object", "encoding", 3, "2.2.3", "Inspect the internal encoding of a Redis object"),
		keySub(objSpec, "object", "freq", 3, "4.0.0", "Get the logarithmic access frequency counter of a Redis object"),
		keySub(objSpec, "object", "idletime", 3, "2.2.3", "Get the time since a Redis object was last accessed"),
		keySub(objSpec, "object", "refcount", 3, "2.2.3", "Get the number of references to the value of the key"),
		help(objSpec, "object"))
	object.Run = func(x *Call, args [][]byte) { runKV(x, objSpec, args) }
	memory := container("memory", "A container for memory diagnostics commands", "server",
		keySub(memSpec, "memory", "usage", -3, "4.0.0", "Estimate the memory usage of a key"),
		&Cmd{Name: "memory|stats", Arity: 2, ACL: []string{"@slow"}, Summary: "Show memory usage details",
			Group: "server", Since: "4.0.0", Run: memoryStats},
		&Cmd{Name: "memory|doctor", Arity: 2, ACL: []string{"@slow"}, Summary: "Outputs memory problems report",
			Group: "server", Since: "4.0.0", Run: func(x *Call, _ [][]byte) {
				verbatim(&x.W, "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.")
			}},
		help(memSpec, "memory"))
	memory.Run = func(x *Call, args [][]byte) { runKV(x, memSpec, args) }
	register(object, memory)
}

// runKV runs a kv command answered at once and writes its reply.
func runKV(x *Call, spec *kv.Spec, args [][]byte) {
	if !spec.ArityOK(len(args)) {
		x.fail(WrongArity(spec.Name))
		return
	}
	res, err := x.Env.do1(kv.New(spec, args, x.W.RESP3).Request())
	switch {
	case err != nil:
		x.fail(Text(err))
	case res.Err != nil:
		x.fail(Text(res.Err))
	default:
		x.W.B = append(x.W.B, res.Reply...)
	}
}

// memoryStats is MEMORY STATS: the fields Redis's tools read, from what
// this server counts (the keys; the process's heap).
func memoryStats(x *Call, _ [][]byte) {
	n, err := x.Env.Backend.Len(context.Background())
	if err != nil {
		x.fail(Text(err))
		return
	}
	fields := []struct {
		name string
		v    int64
	}{{"keys.count", int64(n)}, {"dataset.bytes", engine.OffHeapBytes()}}
	x.W.Map(len(fields))
	for _, f := range fields {
		x.W.BulkString(f.name)
		x.W.Int(f.v)
	}
}
