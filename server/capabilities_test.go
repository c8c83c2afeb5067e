package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/status"
)

// capableBackend implements every capability the server knows of, so that
// only what Config declares can decide what the server does with it.
type capableBackend struct {
	*slotBackend
}

var (
	_ Policies      = capableBackend{}
	_ Persistence   = capableBackend{}
	_ WriteStopper  = capableBackend{}
	_ Cluster       = capableBackend{}
	_ RaftSnapshots = capableBackend{}
	_ SlotRouter    = capableBackend{}
	_ GroupAdder    = capableBackend{}
	_ SlotMover     = capableBackend{}
)

func (capableBackend) Save(context.Context) error            { return nil }
func (capableBackend) BackgroundSave() bool                  { return true }
func (capableBackend) LastSave() time.Time                   { return time.Unix(1700000000, 0) }
func (capableBackend) Shutdown(context.Context, bool) error  { return nil }
func (capableBackend) PersistenceStatus() status.Persistence { return status.Persistence{LastOK: true} }
func (capableBackend) StopWrites() bool                      { return false }
func (capableBackend) StopWritesOnSaveError() bool           { return true }
func (capableBackend) ClusterStatus() status.Cluster {
	return status.Cluster{NodeID: "n1", Role: "leader"}
}
func (capableBackend) Join(context.Context, string, string) error     { return nil }
func (capableBackend) Remove(context.Context, string) error           { return nil }
func (capableBackend) Digest(context.Context) (uint64, string, error) { return 7, "d", nil }
func (capableBackend) RaftSnapshotStatus() status.RaftSnapshots       { return status.RaftSnapshots{} }
func (capableBackend) AddGroup(context.Context) (uint32, error)       { return 5, nil }
func (capableBackend) MoveSlots(context.Context, int, int, uint32) (uint64, error) {
	return 9, nil
}
func (capableBackend) StartRebalance() bool { return true }

// TestCapabilitiesAreDeclared: the server has a capability only when its
// Config declares it, never because the backend happens to implement it
// (issue 31: they were found by type assertion on the backend). The same
// backend, which implements them all, is served with nothing declared,
// with only Cluster, and with everything.
func TestCapabilitiesAreDeclared(t *testing.T) {
	b := capableBackend{newSlotBackend(t, threeNodes())}
	all := Config{Policies: b, Persistence: b, WriteStopper: b, Cluster: b, RaftSnapshots: b, Router: b, GroupAdder: b, SlotMover: b}
	notSharded := "-" + command.ErrTextNotSharded
	for _, tc := range []struct {
		name string
		cfg  Config
		want map[string]string // command (space-separated) -> reply
		info map[string]bool   // INFO persistence field -> present
	}{
		{"none declared", Config{}, map[string]string{
			"RL.POLICY LIST":      "-" + command.ErrNoPolicies,
			"SAVE":                "-" + command.ErrNoPersistence,
			"LASTSAVE":            "-" + command.ErrNoPersistence,
			"RL.CLUSTER DIGEST":   "-" + command.ErrTextNoCluster,
			"RL.CLUSTER ADDGROUP": "-" + command.ErrTextNoCluster,
			"CLUSTER MYID":        "-" + command.ErrTextNoCluster,
			"ROLE":                "[master :0 []]",
		}, map[string]bool{"rl_snapshots:0": true, "rl_raft_snapshots_taken": false, "rl_stop_writes_on_bgsave_error": false}},
		{"cluster only", Config{Cluster: b}, map[string]string{
			"RL.POLICY LIST":         "-" + command.ErrNoPolicies,
			"SAVE":                   "-" + command.ErrNoPersistence,
			"RL.CLUSTER DIGEST":      "[:7 d]",
			"RL.CLUSTER ADDGROUP":    notSharded,
			"RL.CLUSTER MOVE 0 10 2": notSharded,
			"RL.CLUSTER REBALANCE":   notSharded,
			"RL.CLUSTER GROUPS":      notSharded,
			"CLUSTER MYID":           "-" + command.ErrTextNoCluster,
			"ROLE":                   "[master :0 []]",
		}, map[string]bool{"rl_snapshots:0": true, "rl_raft_snapshots_taken": false}},
		{"all declared", all, map[string]string{
			"RL.POLICY LIST":         "[]",
			"SAVE":                   "OK",
			"LASTSAVE":               ":1700000000",
			"RL.CLUSTER DIGEST":      "[:7 d]",
			"RL.CLUSTER ADDGROUP":    ":5",
			"RL.CLUSTER MOVE 0 10 2": ":9",
			"RL.CLUSTER REBALANCE":   "OK",
			"CLUSTER MYID":           threeNodes().MyID,
		}, map[string]bool{"rl_snapshots:1": true, "rl_raft_snapshots_taken": true, "rl_stop_writes_on_bgsave_error:yes": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, _ := serveConfig(t, tc.cfg, b)
			c, r := dial(t, addr)
			for cmd, want := range tc.want {
				if _, err := c.Write([]byte(encode(strings.Fields(cmd)...))); err != nil {
					t.Fatal(err)
				}
				if got := readReply(t, r); got != want {
					t.Errorf("%s: %q, want %q", cmd, got, want)
				}
			}
			c.Write([]byte(encode("INFO", "persistence")))
			info := readReply(t, r)
			for field, present := range tc.info {
				if strings.Contains(info, field) != present {
					t.Errorf("INFO persistence has %s: %v, want %v\n%s", field, !present, present, info)
				}
			}
		})
	}
}
