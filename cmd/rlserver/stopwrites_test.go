package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStopWritesOption: stop-writes-on-bgsave-error defaults to no, is
// read from the config file, RL_STOP_WRITES_ON_BGSAVE_ERROR and the flag
// (yes or no in any case, reported in lower case as Redis does), and
// anything else stops start-up with Redis's wording.
func TestStopWritesOption(t *testing.T) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "RL_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	o, err := parseFlags(nil)
	if err != nil || o.persist.stopWrites != "no" || o.ops.settings["stop-writes-on-bgsave-error"] != "no" {
		t.Fatalf("default: %q (setting %q), %v; want no", o.persist.stopWrites, o.ops.settings["stop-writes-on-bgsave-error"], err)
	}
	conf := filepath.Join(t.TempDir(), "rl.conf")
	os.WriteFile(conf, []byte("stop-writes-on-bgsave-error Yes\n"), 0o644)
	if o, err := parseFlags([]string{"--config", conf}); err != nil || o.persist.stopWrites != "yes" || o.ops.settings["stop-writes-on-bgsave-error"] != "yes" {
		t.Errorf("config file: %q, %v; want yes", o.persist.stopWrites, err)
	}
	t.Setenv("RL_STOP_WRITES_ON_BGSAVE_ERROR", "NO")
	if o, err := parseFlags([]string{"--config", conf}); err != nil || o.persist.stopWrites != "no" {
		t.Errorf("env over the file: %q, %v; want no", o.persist.stopWrites, err)
	}
	if o, err := parseFlags([]string{"--stop-writes-on-bgsave-error", "yes"}); err != nil || o.persist.stopWrites != "yes" {
		t.Errorf("flag over env: %q, %v; want yes", o.persist.stopWrites, err)
	}
	_, err = parseFlags([]string{"--stop-writes-on-bgsave-error", "true"})
	if want := `invalid value "true" for --stop-writes-on-bgsave-error: argument must be 'yes' or 'no'`; err == nil || err.Error() != want {
		t.Errorf("bad value: %v, want %q", err, want)
	}
}
