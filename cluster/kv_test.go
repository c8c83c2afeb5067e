package cluster

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strconv"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/cluster/entry"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
)

// Data commands (package kv) in log entries and forwarded batches: an
// OpCmd request carries the command's kv encoding (entry.AppendRequest), which
// entry.DecodeRequests decodes and checks against the request's key and tiers
// before the batch can reach the log; forwarded results carry the reply.

// kvCmd parses args (name first) as a kv command, as the server does.
func kvCmd(t testing.TB, resp3 bool, args ...string) *kv.Cmd {
	t.Helper()
	spec, ok := kv.Lookup([]byte(args[0]))
	if !ok {
		t.Fatalf("kv has no command %q", args[0])
	}
	if !spec.ArityOK(len(args)) {
		t.Fatalf("%q: wrong arity", args)
	}
	return kv.New(spec, byteArgs(args...), resp3)
}

func byteArgs(args ...string) [][]byte {
	out := make([][]byte, len(args))
	for i, a := range args {
		out[i] = []byte(a)
	}
	return out
}

// kvBatch is a batch mixing data commands, a transaction, WATCH's digest
// read and limiter requests.
func kvBatch(t testing.TB) []engine.Request {
	t.Helper()
	txn := kv.NewTxn([]*kv.Cmd{
		kvCmd(t, false, "INCRBY", "c", "3"),
		kvCmd(t, false, "expire", "c", "600"),
	}, nil, false)
	watched := kv.NewTxn([]*kv.Cmd{
		kvCmd(t, true, "incr", "w"),
		kvCmd(t, true, "set", "v", "x\x00\xff", "PX", "1500"),
	}, []kv.Watch{{Key: []byte("w"), Digest: 0xdeadbeefcafe}, {Key: []byte("v"), Digest: 0}}, true)
	reqs := []engine.Request{
		kvCmd(t, false, "incrby", "k", "5").Request(),
		kvCmd(t, false, "expire", "k", "600").Request(),
		entryFuzzMust(engine.TokenBucket([]byte("bucket"), 10, 1, 1)),
		txn.Request(),
		kvCmd(t, false, "get", "k").Request(),
		kvCmd(t, true, "mset", "a", "1", "b", "two").Request(), // two keys: Tiers 1
		watched.Request(),
		kv.NewDigests(byteArgs("a", "b", "c")).Request(),
		kv.NewTxn(nil, nil, false).Request(), // MULTI; EXEC: no key
		kvCmd(t, false, "set", "", "empty key").Request(),
	}
	for i, r := range reqs {
		if err := engine.Validate(&r); err != nil {
			t.Fatalf("request %d (%+v) is not valid: %v", i, r, err)
		}
	}
	return reqs
}

// sameRequest compares a decoded request with the original: every field,
// and the command by its encoding.
func sameRequest(t *testing.T, i int, got, want *engine.Request) {
	t.Helper()
	g, w := *got, *want
	g.Cmd, w.Cmd = nil, nil
	if len(g.Key) == 0 && len(w.Key) == 0 {
		g.Key, w.Key = nil, nil
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("request %d: decoded %+v, want %+v", i, g, w)
	}
	if (got.Cmd == nil) != (want.Cmd == nil) {
		t.Fatalf("request %d: decoded Cmd %v, want %v", i, got.Cmd, want.Cmd)
	}
	if want.Cmd == nil {
		return
	}
	if a, b := kv.Append(nil, got.Cmd), kv.Append(nil, want.Cmd); !bytes.Equal(a, b) {
		t.Errorf("request %d: command re-encodes to %q, want %q", i, a, b)
	}
	if reflect.TypeOf(got.Cmd) != reflect.TypeOf(want.Cmd) {
		t.Errorf("request %d: decoded a %T, want a %T", i, got.Cmd, want.Cmd)
	}
	if !reflect.DeepEqual(got.Cmd.Keys(), want.Cmd.Keys()) {
		t.Errorf("request %d: keys %q, want %q", i, got.Cmd.Keys(), want.Cmd.Keys())
	}
	switch w := want.Cmd.(type) {
	case *kv.Cmd:
		g := got.Cmd.(*kv.Cmd)
		if g.Spec() != w.Spec() || g.RESP3 != w.RESP3 || !reflect.DeepEqual(g.Args, w.Args) {
			t.Errorf("request %d: decoded %s %q resp3=%v, want %s %q resp3=%v", i, g.Spec().Name, g.Args, g.RESP3, w.Spec().Name, w.Args, w.RESP3)
		}
	case *kv.Txn:
		g := got.Cmd.(*kv.Txn)
		if len(g.Cmds) != len(w.Cmds) || g.RESP3 != w.RESP3 || len(g.Watches) != len(w.Watches) {
			t.Fatalf("request %d: decoded transaction %+v, want %+v", i, g, w)
		}
		for j := range w.Watches {
			if !bytes.Equal(g.Watches[j].Key, w.Watches[j].Key) || g.Watches[j].Digest != w.Watches[j].Digest {
				t.Errorf("request %d: watch %d decoded %+v, want %+v", i, j, g.Watches[j], w.Watches[j])
			}
		}
		for j := range w.Cmds {
			if g.Cmds[j].Spec() != w.Cmds[j].Spec() || !reflect.DeepEqual(g.Cmds[j].Args, w.Cmds[j].Args) {
				t.Errorf("request %d: command %d decoded %q, want %q", i, j, g.Cmds[j].Args, w.Cmds[j].Args)
			}
		}
	}
}

// TestKVEntryRoundTrip: an entry.Batch entry holding data commands, a
// transaction and limiter requests decodes to the same requests, and the
// forwarded-batch decoder (entry.DecodeRequests) agrees.
func TestKVEntryRoundTrip(t *testing.T) {
	reqs := kvBatch(t)
	chunk := entry.AppendRequests(nil, reqs, nil)
	got, names, err := entry.DecodeRequests(chunk, uint64(len(reqs)), nil)
	if err != nil {
		t.Fatalf("entry.DecodeRequests: %v", err)
	}
	if names != nil {
		t.Fatalf("names %q from a batch without policies", names)
	}
	for i := range reqs {
		sameRequest(t, i, &got[i], &reqs[i])
	}
	// Through a whole log entry, plain and under entry.NoCreate.
	entryBytes := entry.AppendHeader(nil, entry.Batch, t0)
	entryBytes = binary.AppendUvarint(entryBytes, uint64(len(reqs)))
	entryBytes = append(entryBytes, chunk...)
	for _, b := range [][]byte{entryBytes, append([]byte{entry.NoCreate}, entryBytes...)} {
		e, err := entry.Decode(b)
		if err != nil {
			t.Fatalf("entry.Decode: %v", err)
		}
		if e.Type != entry.Batch || e.NowNanos != t0 || len(e.Reqs) != len(reqs) {
			t.Fatalf("decoded entry %+v", e)
		}
		for i := range reqs {
			sameRequest(t, i, &e.Reqs[i], &reqs[i])
		}
		// Re-encoding the decoded entry gives the same bytes.
		again := reencodePolicyEntry(entry.AppendHeader(nil, e.Type, e.NowNanos), &e)
		if !bytes.Equal(again, entryBytes) {
			t.Fatalf("decoded entry re-encodes to\n%q\nwant\n%q", again, entryBytes)
		}
	}
	// The decoded commands alias the entry, as the FSM expects, and run:
	// applying the entry gives every data command a reply.
	f := newFSM(engine.New(2))
	defer f.eng.Close()
	res := f.applyEntryForTest(t, entryBytes)
	for i, r := range reqs {
		if r.Op == engine.OpCmd && (res[i].Reply == "" || res[i].Err != nil) {
			t.Errorf("request %d: result %+v", i, res[i])
		}
	}
	if res[0].Reply != ":5\r\n" || res[1].Reply != ":1\r\n" || res[4].Reply != "$1\r\n5\r\n" {
		t.Errorf("INCRBY, EXPIRE, GET replies: %q %q %q", res[0].Reply, res[1].Reply, res[4].Reply)
	}
	if res[3].Reply != "*2\r\n:3\r\n:1\r\n" {
		t.Errorf("MULTI INCRBY EXPIRE EXEC reply: %q", res[3].Reply)
	}
	if res[6].Reply != "*-1\r\n" && res[6].Reply != "_\r\n" {
		t.Errorf("transaction with a changed watched key: reply %q, want a null array", res[6].Reply)
	}
}

// applyEntryForTest applies one log entry through the FSM and returns its
// batch results.
func (f *fsm) applyEntryForTest(t *testing.T, data []byte) []engine.Result {
	t.Helper()
	idx := f.applied.Load() + 1
	r := f.Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data})
	br, ok := r.(*batchResult)
	if !ok {
		t.Fatalf("Apply returned %T %v", r, r)
	}
	return br.res
}

// rawCmdRequest is an OpCmd request in the second encoding around a kv
// encoding given as bytes, for encodings no command makes.
func rawCmdRequest(key string, tiers uint64, flags byte, body []byte) []byte {
	b := []byte{byte(engine.OpCmd), flags}
	b = binary.AppendUvarint(b, tiers)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, uint64(len(body)))
	return append(b, body...)
}

// kvBody is a kv encoding of form (1 a command, 2 a transaction, 3 the
// digest read) with the given flags byte: a command's arguments, or for a
// transaction no watches and the commands given.
func kvBody(form, flags byte, cmds ...[]string) []byte {
	b := []byte{form, flags}
	appendArgs := func(b []byte, args []string) []byte {
		b = binary.AppendUvarint(b, uint64(len(args)))
		for _, a := range args {
			b = binary.AppendUvarint(b, uint64(len(a)))
			b = append(b, a...)
		}
		return b
	}
	if form == 2 {
		b = append(b, 0) // no watches
		b = binary.AppendUvarint(b, uint64(len(cmds)))
	}
	for _, c := range cmds {
		b = appendArgs(b, c)
	}
	return b
}

// TestKVEntryRejectsCorrupt: an OpCmd request that no server writes is
// refused by entry.DecodeRequests (a forwarded batch holding it never reaches
// the log) and by entry.Decode.
func TestKVEntryRejectsCorrupt(t *testing.T) {
	mustDecode := func(what string, chunk []byte, count uint64) {
		t.Helper()
		if _, _, err := entry.DecodeRequests(chunk, count, nil); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	refused := func(what string, chunk []byte, count uint64) {
		t.Helper()
		refusedKV(t, what, chunk, count)
	}

	// Every strict prefix of a good batch, and of each request in it.
	reqs := kvBatch(t)
	chunk := entry.AppendRequests(nil, reqs, nil)
	for i := range len(chunk) {
		refused("batch truncated to "+strconv.Itoa(i)+" bytes", chunk[:i], uint64(len(reqs)))
	}
	for i := range reqs {
		one := entry.AppendRequest(nil, &reqs[i], nil)
		mustDecode("request "+strconv.Itoa(i), one, 1)
		for j := range len(one) {
			refused("request "+strconv.Itoa(i)+" truncated to "+strconv.Itoa(j)+" bytes", one[:j], 1)
		}
		refused("request "+strconv.Itoa(i)+" with a trailing byte", append(bytes.Clone(one), 0), 1)
	}

	// The raw framing itself decodes when it is right.
	good := rawCmdRequest("k", 0, 0, kvBody(1, 0, []string{"incrby", "k", "1"}))
	mustDecode("hand-built INCRBY", good, 1)
	mustDecode("hand-built MSET", rawCmdRequest("a", 1, 0, kvBody(1, 0, []string{"mset", "a", "1", "b", "2"})), 1)
	mustDecode("hand-built transaction", rawCmdRequest("k", 1, 0, kvBody(2, 0, []string{"incrby", "k", "1"}, []string{"expire", "k", "600"})), 1)
	mustDecode("hand-built digest read", rawCmdRequest("k", 0, 0, kvBody(3, 0, []string{"kv.digest", "k"})), 1)

	cases := map[string][]byte{
		// The request's key is the command's first key.
		"wrong key":               rawCmdRequest("other", 0, 0, kvBody(1, 0, []string{"incrby", "k", "1"})),
		"key on a keyless txn":    rawCmdRequest("k", 0, 0, kvBody(2, 0)),
		"no key on a keyed cmd":   rawCmdRequest("", 0, 0, kvBody(1, 0, []string{"get", "k"})),
		"transaction, wrong key":  rawCmdRequest("x", 1, 0, kvBody(2, 0, []string{"incrby", "k", "1"}, []string{"expire", "k", "600"})),
		"two keys, tiers 0":       rawCmdRequest("a", 0, 0, kvBody(1, 0, []string{"mset", "a", "1", "b", "2"})),
		"one key, tiers 1":        rawCmdRequest("k", 1, 0, kvBody(1, 0, []string{"incrby", "k", "1"})),
		"tiers 2":                 rawCmdRequest("a", 2, 0, kvBody(1, 0, []string{"mset", "a", "1", "b", "2"})),
		"unknown command":         rawCmdRequest("k", 0, 0, kvBody(1, 0, []string{"nosuchcommand", "k"})),
		"limiter command name":    rawCmdRequest("k", 0, 0, kvBody(1, 0, []string{"rl.allow", "k", "10", "1"})),
		"digest read as command":  rawCmdRequest("k", 0, 0, kvBody(1, 0, []string{"kv.digest", "k"})),
		"arity: too few":          rawCmdRequest("k", 0, 0, kvBody(1, 0, []string{"incrby", "k"})),
		"arity: too many":         rawCmdRequest("k", 0, 0, kvBody(1, 0, []string{"get", "k", "k2"})),
		"no arguments":            rawCmdRequest("", 0, 0, kvBody(1, 0, []string{})),
		"unknown form":            rawCmdRequest("k", 0, 0, kvBody(9, 0, []string{"get", "k"})),
		"unknown kv flags":        rawCmdRequest("k", 0, 0, kvBody(1, 2, []string{"get", "k"})),
		"unknown request flags":   rawCmdRequest("k", 0, 8, kvBody(1, 0, []string{"get", "k"})),
		"policy flag on a cmd":    rawCmdRequest("k", 0, 4 /* the policy flag */, kvBody(1, 0, []string{"get", "k"})),
		"trailing bytes in cmd":   rawCmdRequest("k", 0, 0, append(kvBody(1, 0, []string{"get", "k"}), 0)),
		"empty command encoding":  rawCmdRequest("k", 0, 0, nil),
		"command length too long": append(rawCmdRequest("k", 0, 0, kvBody(1, 0, []string{"get", "k"}))[:5], 0x7f),
	}
	for name, b := range cases {
		refused(name, b, 1)
	}
	// A bad request after a good one spoils the batch.
	refused("good then unknown", append(bytes.Clone(good), cases["unknown command"]...), 2)
}

// TestKVBugCorruptTransactionPanicsDecoder: a transaction whose encoding
// holds a command kv does not know (or a known one of the wrong arity,
// or WATCH's digest read) must be refused like any corrupt request. kv.Decode
// leaves a nil *Cmd in the transaction and kv.NewTxn dereferences it, so
// entry.DecodeRequests panics; on a leader that is handleForwardMsg decoding a
// forwarded msgBatchNoDeadline, where nothing recovers: one message to the cluster
// port ends the leader's process.
func TestKVBugCorruptTransactionPanicsDecoder(t *testing.T) {
	for name, b := range map[string][]byte{
		"unknown command in a transaction": rawCmdRequest("k", 1, 0, kvBody(2, 0, []string{"incrby", "k", "1"}, []string{"nosuch", "k"})),
		"wrong arity in a transaction":     rawCmdRequest("k", 0, 0, kvBody(2, 0, []string{"expire", "k"})),
		"digest read in a transaction":     rawCmdRequest("k", 0, 0, kvBody(2, 0, []string{"kv.digest", "k"})),
	} {
		refusedKV(t, name, b, 1)
	}
}

// refusedKV checks that entry.DecodeRequests and entry.Decode refuse a batch of
// count requests in the second encoding, without a panic: on a leader the
// first decodes a forwarded batch, and nothing recovers there.
func refusedKV(t *testing.T, what string, chunk []byte, count uint64) {
	t.Helper()
	try := func(name string, decode func() (any, error)) {
		t.Helper()
		var (
			v   any
			err error
			p   any
		)
		func() {
			defer func() { p = recover() }()
			v, err = decode()
		}()
		switch {
		case p != nil:
			t.Errorf("%s: %s panics: %v", what, name, p)
		case err == nil:
			t.Errorf("%s: %s accepted %+v", what, name, v)
		}
	}
	try("entry.DecodeRequests", func() (any, error) {
		reqs, _, err := entry.DecodeRequests(chunk, count, nil)
		return reqs, err
	})
	e := entry.AppendHeader(nil, entry.Batch, t0)
	e = binary.AppendUvarint(e, count)
	e = append(e, chunk...)
	try("entry.Decode", func() (any, error) {
		ent, err := entry.Decode(e)
		return ent.Reqs, err
	})
}

// TestKVResultsRoundTrip: forwarded results carry a data command's reply
// (any bytes, RESP2 or RESP3, an error reply) next to limiter results.
func TestKVResultsRoundTrip(t *testing.T) {
	res := []engine.Result{
		{Reply: ":5\r\n"},
		{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: 1e9},
		{Reply: "*2\r\n:3\r\n:1\r\n"},
		{Reply: "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
		{Reply: "$3\r\nx\x00\xff\r\n"},
		{Reply: "_\r\n"},
		{Reply: string(bytes.Repeat([]byte("z"), 70_000))},
		{Err: engine.ErrWrongType},
		{},
	}
	back, err := decodeResults(appendResults(nil, res))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, res) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, res)
	}
	// A truncated reply is refused.
	b := appendResults(nil, res[:1])
	for i := range len(b) {
		if _, err := decodeResults(b[:i]); err == nil {
			t.Errorf("results truncated to %d bytes: decoded", i)
		}
	}
}

// kvFuzzSeed is an entry.Batch entry with data commands for FuzzDecodeEntry.
func kvFuzzSeed(t testing.TB) []byte {
	reqs := kvBatch(t)
	b := entry.AppendHeader(nil, entry.Batch, t0)
	b = binary.AppendUvarint(b, uint64(len(reqs)))
	return entry.AppendRequests(b, reqs, nil)
}
