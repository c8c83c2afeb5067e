package main

import (
	"reflect"
	"testing"

	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/groups"
	"github.com/rlserver/rlserver/server"
	"github.com/rlserver/rlserver/standalone"
)

// TestCapabilities pins the capabilities each kind of server declares in
// server.Config: which capability fields are set, and to what.
func TestCapabilities(t *testing.T) {
	b, snaps := standalone.New(nil, nil), &snapshots{}
	n, h := &cluster.Node{}, &groups.Host{}
	var alone, node, host server.Config
	declareStandalone(&alone, b, snaps)
	declareNode(&node, n)
	declareHost(&host, h)
	for _, tc := range []struct {
		name string
		cfg  server.Config
		want map[string]any // capability field -> value; the others nil
	}{
		{"standalone", alone, map[string]any{"Policies": b, "Scanner": b, "CmdWriter": b, "LiveEngine": b, "Persistence": snaps, "WriteStopper": snaps}},
		{"one group", node, map[string]any{"Policies": n, "Scanner": n, "CmdWriter": n, "Cluster": n, "RaftSnapshots": n}},
		{"sharded", host, map[string]any{"Policies": h, "Scanner": h, "CmdWriter": h, "Cluster": h, "RaftSnapshots": h, "Router": h, "GroupAdder": h, "SlotMover": h}},
	} {
		// Every interface field of server.Config is a capability.
		v := reflect.ValueOf(tc.cfg)
		seen := 0
		for i := range v.NumField() {
			fv, f := v.Field(i), v.Type().Field(i).Name
			if fv.Kind() != reflect.Interface {
				continue
			}
			var got any
			if !fv.IsNil() {
				got = fv.Interface()
			}
			if want, ok := tc.want[f]; ok {
				seen++
				if got != want {
					t.Errorf("%s: Config.%s = %v, want %v", tc.name, f, got, want)
				}
			} else if got != nil {
				t.Errorf("%s: Config.%s = %v, want nil", tc.name, f, got)
			}
		}
		if seen != len(tc.want) {
			t.Errorf("%s: %d of the %d capabilities wanted are fields of server.Config", tc.name, seen, len(tc.want))
		}
	}
}
