package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// TestHCLogAdapter: Raft's lines through the adapter are the server's slog
// lines: level mapped, keys made safe (a space, a clash with time), values
// printed as hclog prints them, With and Named carried, the server's level
// deciding what is written.
func TestHCLogAdapter(t *testing.T) {
	var buf bytes.Buffer
	level := new(slog.LevelVar)
	root := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level}))
	closing := false
	var l hclog.Logger = newHCLog(root, "raft", func() bool { return closing })

	lines := func() []map[string]any {
		t.Helper()
		var out []map[string]any
		for _, s := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if s == "" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(s), &m); err != nil {
				t.Fatalf("not JSON: %q", s)
			}
			out = append(out, m)
		}
		buf.Reset()
		return out
	}

	l.Error("failed to heartbeat to", "peer", raft.ServerAddress("10.0.0.2:7000"), "backoff time", 10*time.Millisecond, "error", errors.New("EOF"))
	l.Warn("failed to contact", "server-id", raft.ServerID("n2"), "time", 200*time.Millisecond)
	l.Info("pipelining replication", "peer", raft.Server{Suffrage: raft.Voter, ID: "n2", Address: "a:1"}, "odd")
	l.Debug("not written at info")
	got := lines()
	want := []map[string]any{
		{"level": "ERROR", "msg": "failed to heartbeat to", "logger": "raft", "peer": "10.0.0.2:7000", "backoff_time": "10ms", "error": "EOF"},
		{"level": "WARN", "msg": "failed to contact", "logger": "raft", "server-id": "n2", "raft_time": "200ms"},
		{"level": "INFO", "msg": "pipelining replication", "logger": "raft", "peer": "{Suffrage:Voter ID:n2 Address:a:1}", "EXTRA_VALUE_AT_END": "odd"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		if _, err := time.Parse(time.RFC3339Nano, got[i]["time"].(string)); err != nil {
			t.Errorf("line %d: time %v", i, got[i]["time"])
		}
		delete(got[i], "time")
		if len(got[i]) != len(w) {
			t.Errorf("line %d: %v, want %v", i, got[i], w)
		}
		for k, v := range w {
			if got[i][k] != v {
				t.Errorf("line %d: %s = %v, want %v", i, k, got[i][k], v)
			}
		}
	}

	if l.IsDebug() || !l.IsInfo() {
		t.Errorf("IsDebug %v IsInfo %v at the server's info level", l.IsDebug(), l.IsInfo())
	}
	level.Set(slog.LevelDebug)
	if !l.IsTrace() || l.GetLevel() != hclog.Debug {
		t.Errorf("at debug: IsTrace %v, GetLevel %v", l.IsTrace(), l.GetLevel())
	}
	level.Set(slog.LevelInfo)

	snap := l.With("id", "1-2-3").Named("snapshot")
	snap.Info("starting")
	if g := lines(); len(g) != 1 || g[0]["logger"] != "raft.snapshot" || g[0]["id"] != "1-2-3" {
		t.Errorf("With then Named: %v", g)
	}
	if snap.Name() != "raft.snapshot" || len(snap.ImpliedArgs()) != 2 {
		t.Errorf("Name %q, ImpliedArgs %v", snap.Name(), snap.ImpliedArgs())
	}

	// The shutdown lines keep ERROR while the node runs, and only them
	// drop while it closes.
	for _, c := range []bool{false, true} {
		closing = c
		l.Error("peer has newer term, stopping replication", "peer", "n2")
		l.Error("failed to decode incoming command", "error", raft.ErrTransportShutdown)
		l.Error("failed to appendEntries to", "peer", "n2", "error", errors.New("EOF"))
		var levels []string
		for _, m := range lines() {
			levels = append(levels, m["level"].(string))
		}
		want := "ERROR ERROR ERROR"
		if c {
			want = "INFO ERROR" // the transport line is at debug
		}
		if strings.Join(levels, " ") != want {
			t.Errorf("closing=%v: levels %v, want %s", c, levels, want)
		}
	}
}
