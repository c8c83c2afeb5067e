package cluster

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/cluster/entry"
	"github.com/rlserver/rlserver/cluster/ownership"
	"github.com/rlserver/rlserver/engine"
)

// TestEncodingsUnchanged pins the bytes this package and its parts write
// into logs, snapshots and forwarded messages: testdata/encodings.golden
// was written by the code before cluster/ was carved into packages
// (issue 31), and every encoding must still produce the same bytes, or a
// data folder of an older version would no longer open (and replicas of
// two builds would diverge). Set RLSERVER_GOLDEN_UPDATE=1 to rewrite the
// file only for a deliberate, new entry type.
func TestEncodingsUnchanged(t *testing.T) {
	var out bytes.Buffer
	put := func(name string, b []byte) { fmt.Fprintf(&out, "%s %s\n", name, hex.EncodeToString(b)) }
	tb, _ := engine.TokenBucket([]byte("k"), 10, 1.5, 2)
	fx, _ := engine.Fixed([]byte("{t}a"), 5, 1000, 1)
	fx.Tiers = 2
	sl, _ := engine.Sliding([]byte("{t}b"), 7, 2000, 1)
	ro := tb
	ro.ReadOnly = true
	ro.Cost = 0
	cmd := engine.Request{Op: engine.OpCmd, Key: []byte("s"), Cmd: kvCmd(t, false, "set", "s", "v")}
	pol := engine.Request{Key: []byte("p"), Cost: 3}
	reqs := []engine.Request{tb, fx, sl, ro, cmd, pol}
	names := [][]byte{nil, nil, nil, nil, nil, []byte("gold")}
	b := entry.AppendHeader(nil, entry.Batch, 1_700_000_000_123_456_789)
	b = binary.AppendUvarint(b, uint64(len(reqs)))
	b = entry.AppendRequests(b, reqs, names)
	put("batch", b)
	put("nocreate", append([]byte{entry.NoCreate}, b...))
	put("flush", entry.AppendHeader(nil, entry.Flush, 42))
	put("len", entry.AppendHeader(nil, entry.Len, -42))
	put("evict", entry.AppendEvict(nil, 99, engine.EvictRange{From: 3, To: 1 << 40, N: 7}))
	put("evictlru", entry.AppendEvict(nil, 99, engine.EvictRange{From: 3, To: 1 << 40, N: 7, LRU: true}))
	put("polset", entry.AppendPolicy(entry.PolicySet, [][]string{{"gold", "ALLOW", "10", "1"}}))
	put("poldel", entry.AppendPolicy(entry.PolicyDel, [][]string{{"gold"}}))
	put("polrep", entry.AppendPolicy(entry.PolicyReplace, [][]string{{"a", "ALLOW", "10", "1"}, {"b", "FIXED", "5", "1000"}}))
	peers := []Peer{{ID: "n1", Addr: "127.0.0.1:1"}, {ID: "n2", Addr: "127.0.0.1:2"}}
	ops := [][]byte{
		ownership.InitOp(3, peers),
		ownership.RegisterOp("n1", "127.0.0.1:6379"),
		ownership.ForgetOp("n9"),
		ownership.AddGroupOp(peers[:1]),
		ownership.MoveBeginOp(100, 200, 4),
		ownership.MoveCommittedOp(1),
		ownership.MoveReleasedOp(1),
	}
	d := ownership.EmptyDirectory()
	for i, op := range ops {
		put(fmt.Sprintf("meta%d", i), op)
		nd, v, err := d.Apply(op, int64(1000+i))
		if err != nil {
			t.Fatal(err)
		}
		d = nd
		put(fmt.Sprintf("meta%dv", i), binary.AppendUvarint(nil, v))
	}
	put("directory", ownership.AppendDirectory(nil, d))
	src := engine.New(1)
	defer src.Close()
	r1, _ := engine.TokenBucket([]byte("k1"), 10, 1, 3)
	r2, _ := engine.Fixed([]byte("k2"), 10, 100000, 2)
	if err := src.Do(t.Context(), 1000, []engine.Request{r1, r2}, make([]engine.Result, 2)); err != nil {
		t.Fatal(err)
	}
	var recs []engine.Record
	if _, err := src.Export(t.Context(), 1000, func(r engine.Record) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Key > recs[1].Key {
		recs[0], recs[1] = recs[1], recs[0]
	}
	chunk := ownership.ChunkStep(8, 777, recs)
	steps := [][]byte{ownership.ImportStep(8, 0, 20), ownership.FreezeStep(9, 30, 40), chunk,
		ownership.CommitStep(8, 778), ownership.ReleaseStep(9)}
	eng := engine.New(1)
	defer eng.Close()
	f := newFSM(eng)
	for i, st := range steps {
		put(fmt.Sprintf("step%d", i), st)
		data := entry.AppendHeader(nil, entry.Slots, int64(2000+i))
		f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: append(data, st...)})
	}
	put("table", ownership.AppendTable(nil, &f.slots))
	res := []engine.Result{{Allowed: true, Limit: 10, Remaining: 9, RetryAfter: -1, ResetAfter: 1e9, Kind: 1}, {Err: engine.ErrWrongType, Reply: "+OK\r\n"}}
	put("results", appendResults(nil, res))
	var snap bytes.Buffer
	if err := writeSnapshot(&snap, 5, 6, len(recs), [][]string{{"gold", "ALLOW", "10", "1"}}, records(recs), ownership.AppendDirectory(nil, d), ownership.AppendTable(nil, &f.slots)); err != nil {
		t.Fatal(err)
	}
	put("snapshot", snap.Bytes())
	_, dg, err := f.Digest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	put("digest", []byte(dg))
	const golden = "testdata/encodings.golden"
	if os.Getenv("RLSERVER_GOLDEN_UPDATE") != "" {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	wantLines, gotLines := strings.Split(string(want), "\n"), strings.Split(out.String(), "\n")
	if len(wantLines) != len(gotLines) {
		t.Fatalf("%d encodings, want %d", len(gotLines), len(wantLines))
	}
	for i := range wantLines {
		if wantLines[i] != gotLines[i] {
			t.Errorf("encoding changed:\n got %s\nwant %s", gotLines[i], wantLines[i])
		}
	}
}
