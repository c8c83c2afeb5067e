package raftlog_test

import (
	"fmt"
	"log"
	"os"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/raftlog"
)

// A process opens one shared log and gives each Raft group it hosts its
// own GroupLog: the group's raft.LogStore and raft.StableStore, as in
// raft.NewRaft(conf, fsm, users, users, snaps, trans). The groups' writes
// share the log's writes and fdatasyncs.
func ExampleShared() {
	dir, err := os.MkdirTemp("", "raftlog-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	wal, err := raftlog.OpenShared(dir, raftlog.Options{})
	if err != nil {
		log.Fatal(err)
	}
	meta, _ := wal.Group(0)
	users, _ := wal.Group(1)

	// What Raft does: store entries, keep its term, delete the front of
	// its log after a snapshot. Each group numbers its own entries.
	cmd := func(i uint64, data string) *raft.Log {
		return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte(data)}
	}
	if err := meta.StoreLogs([]*raft.Log{cmd(1, "add group 1")}); err != nil {
		log.Fatal(err)
	}
	if err := users.StoreLogs([]*raft.Log{cmd(1, "a"), cmd(2, "b"), cmd(3, "c")}); err != nil {
		log.Fatal(err)
	}
	if err := users.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		log.Fatal(err)
	}
	if err := users.DeleteRange(1, 2); err != nil {
		log.Fatal(err)
	}

	// A leader's deferred write: in the log at once, durable after a
	// sync (the group's own, or any group's StoreLogs).
	if err := users.Append([]*raft.Log{cmd(4, "d")}); err != nil {
		log.Fatal(err)
	}
	fmt.Println("durable before Sync:", users.Durable())
	if _, err := users.Sync(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("durable after Sync:", users.Durable())
	if err := wal.Close(); err != nil {
		log.Fatal(err)
	}

	// After a restart every group finds its own log and keys.
	wal, err = raftlog.OpenShared(dir, raftlog.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer wal.Close()
	fmt.Println("groups:", wal.Groups())
	users, _ = wal.Group(1)
	first, _ := users.FirstIndex()
	last, _ := users.LastIndex()
	term, _ := users.GetUint64([]byte("CurrentTerm"))
	var l raft.Log
	if err := users.GetLog(3, &l); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("group 1: entries %d-%d, term %d, entry 3 %q\n", first, last, term, l.Data)
	// Output:
	// durable before Sync: 3
	// durable after Sync: 4
	// groups: [0 1]
	// group 1: entries 3-4, term 1, entry 3 "c"
}
