package clienttest

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/internal/testfs"
)

// smallFS mounts a 1 MiB tmpfs for a test (mountTmpfs).
func smallFS(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	testfs.MountTmpfs(t, dir, "1m")
	return dir
}

// TestSaveToFullDisk: a save into a full file system fails visibly (the
// error reply to SAVE, INFO rdb_last_bgsave_status:err, the metrics, a log
// line, LASTSAVE unchanged); with stop-writes-on-bgsave-error yes write
// commands then get MISCONF while reads still work, with no (the default)
// every command keeps working; once space is freed a save succeeds and
// writes are accepted again.
func TestSaveToFullDisk(t *testing.T) {
	for _, stop := range []string{"yes", "no"} {
		t.Run("stop-writes-"+stop, func(t *testing.T) {
			dir := smallFS(t)
			args := []string{"--dir", dir, "--save-interval", "0", "--log-level", "info"}
			if stop == "yes" {
				args = append(args, "--stop-writes-on-bgsave-error", "yes")
			}
			s, base := startWithMetrics(t, opts{args: args})
			c := newGoRedis(t, s, &redis.Options{MaxRetries: -1})
			ctx := context.Background()
			if got := configGet(t, c, "stop-writes-on-bgsave-error"); got != stop {
				t.Errorf("CONFIG GET stop-writes-on-bgsave-error = %q, want %q", got, stop)
			}
			do(t, c, "RL.ALLOW", "k", 10, 0.001)
			before, err := c.LastSave(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			filler := testfs.FillUp(t, dir)

			// SAVE fails with an error reply; BGSAVE starts and fails.
			if err := c.Save(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR ") {
				t.Errorf("SAVE on a full disk: %v, want an ERR reply", err)
			}
			if got, err := c.BgSave(ctx).Result(); err != nil || got != "Background saving started" {
				t.Fatalf("BGSAVE: %q, %v", got, err)
			}
			info := waitBgsave(t, c)
			if info["rdb_last_bgsave_status"] != "err" {
				t.Errorf("rdb_last_bgsave_status %q after a failed save, want err", info["rdb_last_bgsave_status"])
			}
			if info["rl_save_failures"] != "2" {
				t.Errorf("rl_save_failures %q, want 2", info["rl_save_failures"])
			}
			if after, _ := c.LastSave(ctx).Result(); after != before {
				t.Errorf("LASTSAVE moved from %d to %d on failed saves", before, after)
			}
			// The log reaches the test through a pipe: give it time.
			if !pollFor(5*time.Second, func() bool { return strings.Contains(s.stderr.String(), "snapshot save failed") }) {
				t.Errorf("no log line for the failed save:\n%s", s.stderr)
			}
			fams := scrape(t, base)
			wantMetric(t, fams, 0, "rlserver_snapshot_last_save_ok")
			wantMetric(t, fams, 2, "rlserver_snapshot_saves_total", "result", "failed")

			refusing := stop == "yes"
			wantMetric(t, fams, map[bool]float64{true: 1, false: 0}[refusing], "rlserver_snapshot_refusing_writes")
			if info["rl_refusing_writes"] != map[bool]string{true: "1", false: "0"}[refusing] {
				t.Errorf("rl_refusing_writes %q", info["rl_refusing_writes"])
			}
			for _, w := range [][]any{
				{"RL.ALLOW", "k", 10, 0.001}, {"CL.THROTTLE", "t", 5, 10, 60}, {"DEL", "k"}, {"RL.RESET", "k"},
				{"RL.CHECK", "nopolicy", "k"}, {"RL.POLICY", "SET", "p", "ALLOW", 5, 1}, {"FLUSHALL"},
			} {
				err := c.Do(ctx, w...).Err()
				var rerr redis.Error
				misconf := err != nil && errors.As(err, &rerr) && strings.HasPrefix(err.Error(), "MISCONF ")
				if refusing && !misconf {
					t.Errorf("%v while saves fail with stop-writes yes: %v, want MISCONF", w, err)
				}
				if !refusing && misconf {
					t.Errorf("%v while saves fail with stop-writes no: %v", w, err)
				}
			}
			if refusing {
				err := c.Do(ctx, "RL.ALLOW", "k", 10, 0.001).Err()
				want := "MISCONF rlserver is configured to save snapshots, but it's currently unable to persist to disk. " +
					"Commands that may modify the data set are disabled, because this instance is configured to report errors during writes " +
					"if snapshotting fails (stop-writes-on-bgsave-error option). Please check the rlserver log for details about the snapshot error."
				if err == nil || err.Error() != want {
					t.Errorf("RL.ALLOW: %v, want %q", err, want)
				}
			}
			// Reads work either way.
			do(t, c, "RL.PEEK", "k", 10, 0.001)
			do(t, c, "PTTL", "k")
			do(t, c, "EXISTS", "k")
			if err := c.Ping(ctx).Err(); err != nil {
				t.Errorf("PING: %v", err)
			}

			// CONFIG SET flips it at run time.
			other := map[string]string{"yes": "no", "no": "yes"}[stop]
			do(t, c, "CONFIG", "SET", "stop-writes-on-bgsave-error", strings.ToUpper(other))
			if got := configGet(t, c, "stop-writes-on-bgsave-error"); got != other {
				t.Errorf("CONFIG GET after SET %s: %q", other, got)
			}
			err = c.Do(ctx, "RL.ALLOW", "k", 10, 0.001).Err()
			if flipped := err != nil && strings.HasPrefix(err.Error(), "MISCONF "); flipped != !refusing {
				t.Errorf("RL.ALLOW after CONFIG SET stop-writes-on-bgsave-error %s: %v", other, err)
			}
			do(t, c, "CONFIG", "SET", "stop-writes-on-bgsave-error", stop)
			if err := c.Do(ctx, "CONFIG", "SET", "stop-writes-on-bgsave-error", "maybe").Err(); err == nil ||
				err.Error() != "ERR CONFIG SET failed (possibly related to argument 'stop-writes-on-bgsave-error') - argument must be 'yes' or 'no'" {
				t.Errorf("CONFIG SET stop-writes-on-bgsave-error maybe: %v", err)
			}

			// Space again: the next save succeeds and writes are accepted.
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			if err := c.Save(ctx).Err(); err != nil {
				t.Fatalf("SAVE with space again: %v", err)
			}
			info = infoPersistence(t, c)
			if info["rdb_last_bgsave_status"] != "ok" || info["rl_refusing_writes"] != "0" {
				t.Errorf("after a good save: rdb_last_bgsave_status %q, rl_refusing_writes %q", info["rdb_last_bgsave_status"], info["rl_refusing_writes"])
			}
			if after, _ := c.LastSave(ctx).Result(); after < before {
				t.Errorf("LASTSAVE %d after a good save, was %d", after, before)
			}
			do(t, c, "RL.ALLOW", "k", 10, 0.001)
			fams = scrape(t, base)
			wantMetric(t, fams, 1, "rlserver_snapshot_last_save_ok")
			wantMetric(t, fams, 0, "rlserver_snapshot_refusing_writes")
		})
	}
}

func infoPersistence(t *testing.T, c *redis.Client) map[string]string {
	t.Helper()
	m, err := c.InfoMap(context.Background(), "persistence").Result()
	if err != nil {
		t.Fatalf("INFO persistence: %v", err)
	}
	return m["Persistence"]
}

// waitBgsave polls INFO persistence until no background save runs and
// returns the section.
func waitBgsave(t *testing.T, c *redis.Client) map[string]string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info := infoPersistence(t, c)
		if info["rdb_bgsave_in_progress"] == "0" {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("background save still running after 20s: %v", info)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
