package clienttest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Persistence: snapshots across graceful restarts, kill -9 and a crash in
// the middle of a save; start-up on a damaged snapshot; SAVE, BGSAVE,
// LASTSAVE, SHUTDOWN and INFO persistence from go-redis and redis-cli.

const snapshotFile = "snapshot.rls"

// pserver is a process on a data folder that outlives it: the tests stop
// and restart servers on the same --dir.
type pserver struct {
	*server
	killed bool // ended by the test with SIGKILL (or by itself): no exit status to check
}

// startIn starts rlserver on a fresh port with --dir dir and waits until it
// answers. At cleanup it is stopped; unless it was killed, it must exit 0.
// Its stderr must never show a panic or a data race.
func startIn(t *testing.T, dir string, o opts) *pserver {
	t.Helper()
	for range 5 {
		port := freePort(t)
		s := &server{
			t:      t,
			port:   port,
			addr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			dir:    dir,
			stdout: &syncBuffer{},
			stderr: &syncBuffer{},
			exited: make(chan struct{}),
		}
		args := append([]string{"--dir", dir, "--addr", s.addr, "--log-level", "warn"}, o.args...)
		s.cmd = exec.Command(binary(), args...)
		s.cmd.Env = cleanEnv(o.env...)
		s.cmd.Stdout = s.stdout
		s.cmd.Stderr = s.stderr
		if err := s.cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", s.cmd.Path, err)
		}
		go func() {
			s.cmd.Wait()
			s.state = s.cmd.ProcessState
			close(s.exited)
		}()
		ps := &pserver{server: s}
		t.Cleanup(func() {
			code, err := s.stop()
			if !ps.killed && (err != nil || code != 0) {
				t.Errorf("rlserver on %s: exit status %d, %v", s.addr, code, err)
			}
			if out := s.stderr.String(); strings.Contains(out, "panic:") || strings.Contains(out, "DATA RACE") {
				t.Errorf("rlserver on %s reported a panic or a race:\n%s", s.addr, out)
			} else if t.Failed() {
				t.Logf("rlserver %s stderr:\n%s", s.addr, out)
			}
		})
		err := s.waitReady("")
		if err == nil {
			return ps
		}
		ps.kill9()
		if !strings.Contains(s.stderr.String(), "address already in use") {
			t.Fatalf("rlserver did not start: %v\nstderr:\n%s", err, s.stderr)
		}
	}
	t.Fatal("rlserver did not start after 5 ports")
	return nil
}

func (p *pserver) kill9() {
	p.killed = true
	p.kill()
}

// stopClean ends the process with SIGTERM and requires exit status 0.
func (p *pserver) stopClean(t *testing.T) {
	t.Helper()
	code, err := p.stop()
	if err != nil || code != 0 {
		t.Fatalf("rlserver on %s: exit status %d, %v\nstderr:\n%s", p.addr, code, err, p.stderr)
	}
}

// goRedis is a client that never retries: a retried write would count
// twice, and a retried SHUTDOWN would reach no one.
func goRedis(t *testing.T, p *pserver) *redis.Client {
	return newGoRedis(t, p.server, &redis.Options{MaxRetries: -1})
}

// kindState is one key per kind of state, the commands that write it and a
// read-only command that shows it. The rates are so slow (one unit in
// 1000 s, windows of 31 years) that nothing refills during a test; only
// the countdown fields move with the clock.
type kindState struct {
	key   string
	write []any
	peek  []any
	exact int // leading fields of the peek reply that must not change at all
}

func kindStates(prefix string) []kindState {
	const window = "1000000000000" // ms: 31.7 years, aligned windows end in 2033
	k := func(s string) string { return prefix + s }
	return []kindState{
		{k("gcra"), []any{"RL.ALLOW", k("gcra"), 100, slowRate, 7}, []any{"RL.PEEK", k("gcra"), 100, slowRate}, 2},
		{k("throttle"), []any{"CL.THROTTLE", k("throttle"), 99, 1, 1000000, 5}, []any{"CL.THROTTLE", k("throttle"), 99, 1, 1000000, 0}, 3},
		{k("gcra88"), []any{"GCRA", k("gcra88"), 99, 1, 1000000, "TOKENS", 4}, []any{"CL.THROTTLE", k("gcra88"), 99, 1, 1000000, 0}, 3},
		{k("fixed"), []any{"RL.FIXED", k("fixed"), 100, window, 6}, []any{"RL.FIXED", k("fixed"), 100, window, 0}, 2},
		{k("sliding"), []any{"RL.SLIDING", k("sliding"), 100, window, 6}, []any{"RL.SLIDING", k("sliding"), 100, window, 0}, 2},
		{k("log"), []any{"RL.LOG", k("log"), 100, window, 3}, []any{"RL.LOG", k("log"), 100, window, 0}, 2},
		{k("shape"), []any{"RL.SHAPE", k("shape"), 100, slowRate, 4}, []any{"RL.SHAPE", k("shape"), 100, slowRate, 0}, 1},
	}
}

// view is what a server shows of the kind states: each peek reply, PTTL
// and TYPE, and DBSIZE, with the time it was read.
type view struct {
	start time.Time // before the first read
	end   time.Time // after the last
	peeks [][]int64
	pttl  []int64
	types []string
	keys  int64
}

func look(t *testing.T, c *redis.Client, states []kindState) view {
	t.Helper()
	v := view{start: time.Now()}
	for _, ks := range states {
		v.peeks = append(v.peeks, int64s(t, do(t, c, ks.peek...)))
		v.pttl = append(v.pttl, doInt(t, c, "PTTL", ks.key))
		typ, _ := do(t, c, "TYPE", ks.key).(string)
		v.types = append(v.types, typ)
	}
	v.keys = doInt(t, c, "DBSIZE")
	v.end = time.Now()
	return v
}

// sameView checks that after shows the same state as before: equal
// fields, except that countdowns (in ms or s) may have gone down by the
// time between the two looks, rounded up.
func sameView(t *testing.T, before, after view, states []kindState) {
	t.Helper()
	elapsedMs := after.end.Sub(before.start).Milliseconds() + 1
	down := func(b, a int64) bool { return a == b || (b > 0 && a >= 0 && b-a <= elapsedMs) }
	for i, ks := range states {
		b, a := before.peeks[i], after.peeks[i]
		ok := len(a) == len(b)
		for j := 0; ok && j < len(b); j++ {
			ok = (j < ks.exact && a[j] == b[j]) || (j >= ks.exact && down(b[j], a[j]))
		}
		if !ok {
			t.Errorf("%v: %v before, %v after (%d ms later)", ks.peek, b, a, elapsedMs)
		}
		if !down(before.pttl[i], after.pttl[i]) || before.pttl[i] < 0 {
			t.Errorf("PTTL %s: %d before, %d after", ks.key, before.pttl[i], after.pttl[i])
		}
		if before.types[i] != after.types[i] || before.types[i] == "none" {
			t.Errorf("TYPE %s: %q before, %q after", ks.key, before.types[i], after.types[i])
		}
	}
	if before.keys != after.keys {
		t.Errorf("DBSIZE: %d before, %d after", before.keys, after.keys)
	}
}

func writeStates(t *testing.T, c *redis.Client, states []kindState, times int) {
	t.Helper()
	for range times {
		for _, ks := range states {
			do(t, c, ks.write...)
		}
	}
}

// TestPersistGracefulRestart: a SIGTERM saves, and the next start shows
// every key exactly as before, whatever the shard counts.
func TestPersistGracefulRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startIn(t, dir, opts{args: []string{"--shards", "8", "--save-interval", "0"}})
	c := goRedis(t, s)
	states := kindStates("g:")
	writeStates(t, c, states, 3)
	before := look(t, c, states)
	if before.keys != int64(len(states)) {
		t.Fatalf("DBSIZE %d, want %d", before.keys, len(states))
	}
	s.stopClean(t) // no save before: the shutdown's save is the only one

	s = startIn(t, dir, opts{args: []string{"--shards", "2"}})
	c = goRedis(t, s)
	sameView(t, before, look(t, c, states), states)
	if got := infoField(t, c, "persistence", "rdb_last_load_keys_loaded"); got != strconv.Itoa(len(states)) {
		t.Errorf("rdb_last_load_keys_loaded = %s, want %d", got, len(states))
	}
	// And once more, through a restart with nothing changed (no save).
	before = look(t, c, states)
	s.stopClean(t)
	s = startIn(t, dir, opts{})
	sameView(t, before, look(t, goRedis(t, s), states), states)
}

// TestPersistKill9UnderLoad: several clients consume tokens while the
// server saves every 50 ms and the test takes SAVE checkpoints; SIGKILL
// ends it mid-load. After the restart every unit acknowledged before the
// last SAVE that returned is still consumed, none is consumed that was
// never sent, and the server serves at once.
func TestPersistKill9UnderLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startIn(t, dir, opts{args: []string{"--save-interval", "50ms"}})
	const (
		clients       = 6
		keysPerClient = 40
		capacity      = 1_000_000
		checkpoints   = 3
	)
	ctx := context.Background()
	var (
		mu         sync.Mutex
		acked      = map[string]int64{} // units acknowledged as allowed
		sent       = map[string]int64{} // units sent, answered or not
		checkpoint map[string]int64     // acked when the last good SAVE was sent
		stop       atomic.Bool
		wg         sync.WaitGroup
	)
	for ci := range clients {
		c := goRedis(t, s)
		wg.Go(func() {
			for round := 0; !stop.Load(); round++ {
				pipe := c.Pipeline()
				cmds := make([]*redis.Cmd, keysPerClient)
				keys := make([]string, keysPerClient)
				mu.Lock()
				for i := range cmds {
					keys[i] = fmt.Sprintf("load:%d:%d", ci, i)
					cost := int64(1 + (round+i)%3)
					cmds[i] = pipe.Do(ctx, "RL.ALLOW", keys[i], capacity, slowRate, cost)
					sent[keys[i]] += cost
				}
				mu.Unlock()
				if _, err := pipe.Exec(ctx); err != nil {
					return // the server is gone
				}
				mu.Lock()
				for i, cmd := range cmds {
					r, err := cmd.Int64Slice()
					if err != nil || len(r) != 4 || r[0] != 1 {
						t.Errorf("RL.ALLOW %s: %v, %v", keys[i], r, err)
						continue
					}
					acked[keys[i]] = capacity - r[1]
				}
				mu.Unlock()
			}
		})
	}
	total := func() int64 {
		mu.Lock()
		defer mu.Unlock()
		n := int64(0)
		for _, v := range acked {
			n += v
		}
		return n
	}
	moreLoad := func() {
		target := total() + 3000
		waitFor(t, "more load", func() bool { return total() >= target })
	}
	// Checkpoints: what was acknowledged before SAVE was sent is in the
	// snapshot SAVE wrote.
	admin := goRedis(t, s)
	for range checkpoints {
		moreLoad()
		mu.Lock()
		snap := make(map[string]int64, len(acked))
		for k, v := range acked {
			snap[k] = v
		}
		mu.Unlock()
		if err := admin.Save(ctx).Err(); err != nil {
			t.Fatalf("SAVE: %v", err)
		}
		checkpoint = snap
	}
	// Periodic saves happen too; kill while the load runs.
	waitFor(t, "periodic saves", func() bool {
		n, _ := strconv.Atoi(infoField(t, admin, "persistence", "rdb_saves"))
		return n >= checkpoints+2
	})
	moreLoad()
	s.kill9()
	stop.Store(true)
	wg.Wait()
	if len(checkpoint) < clients*keysPerClient/2 {
		t.Fatalf("the last checkpoint covers %d keys only", len(checkpoint))
	}

	start := time.Now()
	s = startIn(t, dir, opts{})
	t.Logf("restarted and serving in %v; %d keys at the last checkpoint", time.Since(start), len(checkpoint))
	c := goRedis(t, s)
	fresh, kept := 0, 0
	for k, units := range sent {
		got := int64s(t, do(t, c, "RL.PEEK", k, capacity, slowRate, 0))
		consumed := capacity - got[1]
		if consumed < checkpoint[k] {
			fresh++
			if fresh <= 10 {
				t.Errorf("%s: %d units consumed after the restart, %d were at the last SAVE", k, consumed, checkpoint[k])
			}
		}
		if consumed > units {
			t.Errorf("%s: %d units consumed, only %d sent", k, consumed, units)
		}
		if consumed >= acked[k] {
			kept++
		}
	}
	t.Logf("%d keys, %d with every acknowledged unit kept (later periodic saves), %d below the checkpoint", len(sent), kept, fresh)
}

// TestPersistCrashDuringSave: a process killed between writing its new
// snapshot and renaming it leaves the previous snapshot, which loads.
func TestPersistCrashDuringSave(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	states := kindStates("c:")
	s := startIn(t, dir, opts{args: []string{"--save-interval", "0"}})
	c := goRedis(t, s)
	writeStates(t, c, states, 2)
	wantReply(t, c, "OK", "SAVE")
	saved := look(t, c, states)
	s.stopClean(t)
	good, err := os.ReadFile(filepath.Join(dir, snapshotFile))
	if err != nil {
		t.Fatal(err)
	}

	s = startIn(t, dir, opts{args: []string{"--save-interval", "0"}, env: []string{"RLSERVER_TEST_CRASH_BEFORE_RENAME=1"}})
	s.killed = true // by itself
	c = goRedis(t, s)
	writeStates(t, c, states, 1)
	do(t, c, "RL.ALLOW", "c:new", 10, slowRate)
	if err := c.Save(context.Background()).Err(); err == nil {
		t.Fatal("SAVE succeeded; the process should have died before the rename")
	}
	if _, err := s.wait(stopTimeout); err != nil {
		t.Fatal(err)
	}
	if ws, ok := s.state.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the process ended with %v, want SIGKILL", s.state)
	}
	var temps []string
	for _, e := range mustReadDir(t, dir) {
		if strings.HasPrefix(e, snapshotFile+".tmp-") {
			temps = append(temps, e)
		}
	}
	if len(temps) != 1 {
		t.Fatalf("folder %q: want the crashed save's temporary file", mustReadDir(t, dir))
	}
	if now, _ := os.ReadFile(filepath.Join(dir, snapshotFile)); !bytes.Equal(now, good) {
		t.Fatal("the snapshot changed although the save never renamed its file")
	}

	s = startIn(t, dir, opts{})
	c = goRedis(t, s)
	sameView(t, saved, look(t, c, states), states)
	wantInt(t, c, 0, "EXISTS", "c:new")
	// rlserver.lock is the running server's lock on the folder.
	if got := mustReadDir(t, dir); len(got) != 2 || got[0] != "rlserver.lock" || got[1] != snapshotFile {
		t.Errorf("after the restart the folder holds %q, want only rlserver.lock and %s", got, snapshotFile)
	}
}

func mustReadDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestPersistDamagedSnapshot: a corrupt, truncated or newer snapshot stops
// the start with one line naming the file and the problem and leaves the
// file alone; --discard-corrupt-snapshot moves a damaged one aside.
func TestPersistDamagedSnapshot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startIn(t, dir, opts{})
	c := goRedis(t, s)
	writeStates(t, c, kindStates("d:"), 1)
	s.stopClean(t)
	path := filepath.Join(dir, snapshotFile)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x04
	newer := bytes.Clone(good)
	copy(newer[8:12], []byte{0, 9, 0xff, 0xf6}) // format version 9 and its complement

	for _, tc := range []struct {
		name    string
		data    []byte
		problem string // regexp, after the path
		discard bool   // --discard-corrupt-snapshot moves it aside
	}{
		{"flipped bit", flipped, `snapshot corrupt: block at byte \d+: checksum mismatch`, true},
		{"truncated", good[:len(good)-5], `snapshot truncated: the file ends at byte \d+, inside the trailer`, true},
		{"not a snapshot", []byte("REDIS0011\xfa"), `snapshot corrupt: not an rlserver snapshot \(bad magic\)`, true},
		{"newer version", newer, `snapshot from a newer format version: format version 9, this build reads up to 2; the file is left as it is: run a newer rlserver`, false},
	} {
		if err := os.WriteFile(path, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, discard := range []bool{false, true} {
			args := []string{"--dir", dir, "--addr", "127.0.0.1:" + strconv.Itoa(freePort(t))}
			if discard {
				if tc.discard {
					continue // started below, as a server
				}
				args = append(args, "--discard-corrupt-snapshot")
			}
			out, errOut, code := runBinary(t, nil, args...)
			want := "^rlserver: " + regexp.QuoteMeta(path) + ": " + tc.problem
			if !tc.discard || discard {
				want += "$"
			} else {
				want += regexp.QuoteMeta("; the file is left as it is (--discard-corrupt-snapshot moves it aside and starts empty)") + "$"
			}
			if code == 0 || out != "" || strings.Count(errOut, "\n") != 1 || !regexp.MustCompile(want).MatchString(strings.TrimSuffix(errOut, "\n")) {
				t.Errorf("%s (discard %v): status %d, stderr %q; want one line matching %q", tc.name, discard, code, errOut, want)
			}
			if now, _ := os.ReadFile(path); !bytes.Equal(now, tc.data) {
				t.Errorf("%s: the file changed", tc.name)
			}
		}
		if !tc.discard {
			continue
		}
		s := startIn(t, dir, opts{args: []string{"--discard-corrupt-snapshot"}})
		wantInt(t, goRedis(t, s), 0, "DBSIZE")
		if !strings.Contains(s.stderr.String(), "snapshot damaged: moved aside, starting empty") {
			t.Errorf("%s: no warning in the log:\n%s", tc.name, s.stderr)
		}
		s.stopClean(t)
		var moved []string
		for _, n := range mustReadDir(t, dir) {
			if strings.HasPrefix(n, snapshotFile+".corrupt-") {
				moved = append(moved, n)
				if b, _ := os.ReadFile(filepath.Join(dir, n)); !bytes.Equal(b, tc.data) {
					t.Errorf("%s: %s does not hold the damaged file", tc.name, n)
				}
				os.Remove(filepath.Join(dir, n))
			}
		}
		if len(moved) != 1 || !regexp.MustCompile(`^snapshot\.rls\.corrupt-\d{8}T\d{6}Z$`).MatchString(moved[0]) {
			t.Errorf("%s: moved aside as %q", tc.name, moved)
		}
	}
}

// TestPersistCommandsGoRedis: SAVE, BGSAVE, LASTSAVE, INFO persistence and
// SHUTDOWN [NOSAVE|SAVE] through go-redis.
func TestPersistCommandsGoRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := startIn(t, dir, opts{args: []string{"--save-interval", "0"}})
	c := goRedis(t, s)
	info := func() map[string]string {
		m, err := c.InfoMap(ctx, "persistence").Result()
		if err != nil {
			t.Fatalf("INFO persistence: %v", err)
		}
		return m["Persistence"]
	}
	startedAt := time.Now().Unix()
	if got := c.LastSave(ctx).Val(); got < startedAt-60 || got > startedAt+1 {
		t.Errorf("LASTSAVE before any save = %d, want the start-up time (about %d)", got, startedAt)
	}
	in := info()
	for k, v := range map[string]string{
		"loading": "0", "rdb_changes_since_last_save": "0", "rdb_bgsave_in_progress": "0", "rdb_last_bgsave_status": "ok",
		"rdb_last_bgsave_time_sec": "-1", "rdb_saves": "0", "aof_enabled": "0", "rl_save_interval_ms": "0",
		"rl_snapshot_dir": dir, "rl_snapshot_file": snapshotFile, "rl_last_save_keys": "0",
	} {
		if in[k] != v {
			t.Errorf("INFO persistence %s = %q, want %q", k, in[k], v)
		}
	}

	// 20,000 keys, so a save takes long enough (milliseconds: it syncs a
	// file) for a second BGSAVE in the same pipeline to meet it.
	pipe := c.Pipeline()
	for i := range 20000 {
		pipe.Do(ctx, "RL.ALLOW", "cmd:"+strconv.Itoa(i), 10, slowRate)
	}
	pipe.Do(ctx, "RL.ALLOW", "cmd:0", 10, slowRate, 20) // denied: no change
	pipe.Do(ctx, "RL.PEEK", "cmd:1", 10, slowRate)      // read: no change
	pipe.Do(ctx, "DEL", "cmd:19999")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if got := info()["rdb_changes_since_last_save"]; got != "20001" {
		t.Errorf("rdb_changes_since_last_save = %s after 20000 writes and a DEL", got)
	}
	if got, err := c.Save(ctx).Result(); got != "OK" || err != nil {
		t.Fatalf("SAVE = %q, %v", got, err)
	}
	in = info()
	fi, err := os.Stat(filepath.Join(dir, snapshotFile))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"rdb_changes_since_last_save": "0", "rdb_saves": "1", "rl_last_save_keys": "19999",
		"rl_last_save_bytes": strconv.FormatInt(fi.Size(), 10), "rdb_last_bgsave_status": "ok",
	} {
		if in[k] != v {
			t.Errorf("after SAVE: INFO persistence %s = %q, want %q", k, in[k], v)
		}
	}
	if got := c.LastSave(ctx).Val(); got < time.Now().Unix()-60 || got > time.Now().Unix() {
		t.Errorf("LASTSAVE after SAVE = %d", got)
	}

	// BGSAVE twice in one pipeline: the second meets the first.
	pipe = c.Pipeline()
	first := pipe.BgSave(ctx)
	second := pipe.BgSave(ctx)
	during := pipe.Info(ctx, "persistence")
	pipe.Exec(ctx)
	if first.Val() != "Background saving started" || first.Err() != nil {
		t.Errorf("BGSAVE = %q, %v", first.Val(), first.Err())
	}
	if second.Err() == nil || second.Err().Error() != "ERR Background save already in progress" {
		t.Errorf("BGSAVE during a BGSAVE = %q, %v", second.Val(), second.Err())
	}
	if !strings.Contains(during.Val(), "rdb_bgsave_in_progress:1\r\n") {
		t.Errorf("INFO persistence during a BGSAVE:\n%s", during.Val())
	}
	wantReply(t, c, "OK", "SAVE") // waits for the background save
	waitFor(t, "the background save to end", func() bool { return info()["rdb_bgsave_in_progress"] == "0" })
	if in := info(); in["rdb_saves"] != "3" || in["rdb_last_bgsave_time_sec"] != "0" {
		t.Errorf("after BGSAVE and SAVE: rdb_saves %s, rdb_last_bgsave_time_sec %s", in["rdb_saves"], in["rdb_last_bgsave_time_sec"])
	}
	wantErr(t, c, "ERR syntax error", "BGSAVE", "NOW")
	wantReply(t, c, "Background saving started", "BGSAVE", "SCHEDULE")
	waitFor(t, "the background save to end", func() bool { return info()["rdb_bgsave_in_progress"] == "0" })
	wantErr(t, c, "ERR syntax error", "SHUTDOWN", "NOSAVE", "SAVE")
	wantErr(t, c, "ERR syntax error", "SHUTDOWN", "LATER")
	wantErr(t, c, "ERR No shutdown in progress.", "SHUTDOWN", "ABORT")
	wantErr(t, c, "ERR wrong number of arguments for 'save' command", "SAVE", "x")

	// SHUTDOWN NOSAVE: what changed since the last save is lost.
	do(t, c, "RL.ALLOW", "cmd:0", 10, slowRate, 5) // 6 used
	if err := c.ShutdownNoSave(ctx).Err(); err != nil {
		t.Fatalf("SHUTDOWN NOSAVE: %v", err)
	}
	if code, err := s.wait(stopTimeout); err != nil || code != 0 {
		t.Fatalf("after SHUTDOWN NOSAVE: exit %d, %v", code, err)
	}
	s = startIn(t, dir, opts{args: []string{"--save-interval", "0"}})
	c = goRedis(t, s)
	wantDecision(t, c, decision{1, 9, exactly(0), aged(periodMs)}, "RL.PEEK", "cmd:0", 10, slowRate, 0)
	wantInt(t, c, 19999, "DBSIZE")

	// SHUTDOWN (SAVE implied) keeps it.
	do(t, c, "RL.ALLOW", "cmd:0", 10, slowRate, 5)
	if err := c.Shutdown(ctx).Err(); err != nil {
		t.Fatalf("SHUTDOWN: %v", err)
	}
	if code, err := s.wait(stopTimeout); err != nil || code != 0 {
		t.Fatalf("after SHUTDOWN: exit %d, %v", code, err)
	}
	s = startIn(t, dir, opts{})
	c = goRedis(t, s)
	wantDecision(t, c, decision{1, 4, exactly(0), aged(6 * periodMs)}, "RL.PEEK", "cmd:0", 10, slowRate, 0)
	if err := c.ShutdownSave(ctx).Err(); err != nil {
		t.Fatalf("SHUTDOWN SAVE: %v", err)
	}
	if code, err := s.wait(stopTimeout); err != nil || code != 0 {
		t.Fatalf("after SHUTDOWN SAVE: exit %d, %v", code, err)
	}
}

// TestPersistCommandsRedisCLI: the same commands from redis-cli.
func TestPersistCommandsRedisCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startIn(t, dir, opts{args: []string{"--save-interval", "0"}})
	if out, _, code := cli(t, s.server, "", "RL.ALLOW", "cli", "5", slowRate, "2"); code != 0 || !strings.HasPrefix(out, "1\n3\n") {
		t.Fatalf("RL.ALLOW: %q, %d", out, code)
	}
	for _, tc := range []struct {
		args []string
		want string // regexp of the whole output
	}{
		{[]string{"INFO", "persistence"}, `(?s)^# Persistence\r?\nloading:0\r?\n.*rdb_changes_since_last_save:1\r?\n.*rdb_saves:0\r?\n`},
		{[]string{"SAVE"}, "^OK\n$"},
		{[]string{"LASTSAVE"}, `^\d{10}\n$`},
		{[]string{"BGSAVE"}, "^Background saving started\n$"},
		{[]string{"INFO", "persistence"}, `(?s)rdb_changes_since_last_save:0\r?\n.*rl_last_save_keys:1\r?\n`},
		{[]string{"SHUTDOWN", "ABORT"}, "^ERR No shutdown in progress.\n"},
	} {
		out, _, code := cli(t, s.server, "", tc.args...)
		if code != 0 || !regexp.MustCompile(tc.want).MatchString(out) {
			t.Errorf("redis-cli %q: status %d, output %q; want %q", tc.args, code, out, tc.want)
		}
	}
	// SHUTDOWN: redis-cli prints nothing and succeeds; the server exits 0.
	out, errOut, code := cli(t, s.server, "", "SHUTDOWN")
	if code != 0 || out != "" {
		t.Errorf("redis-cli SHUTDOWN: status %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, err := s.wait(stopTimeout); err != nil || code != 0 {
		t.Fatalf("after SHUTDOWN: exit %d, %v", code, err)
	}
	s = startIn(t, dir, opts{})
	if out, _, code := cli(t, s.server, "", "RL.PEEK", "cli", "5", slowRate, "0"); code != 0 || !strings.HasPrefix(out, "1\n3\n0\n") {
		t.Errorf("RL.PEEK after the restart: %q, %d", out, code)
	}
}
