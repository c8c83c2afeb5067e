package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigPrecedence pins the order: the config file, then RL_*
// variables, then flags, each overriding the one before.
func TestConfigPrecedence(t *testing.T) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "RL_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	conf := filepath.Join(t.TempDir(), "rl.conf")
	os.WriteFile(conf, []byte("# comment\nmaxclients 11\nmax-key-len = 12\nmax-args 13\nprotected-mode no\nlog-format \"json\"\n"), 0o644)
	t.Setenv("RL_MAX_KEY_LEN", "22")
	t.Setenv("RL_MAX_ARGS", "23")
	o, err := parseFlags([]string{"--config", conf, "--max-args=33"})
	if err != nil {
		t.Fatal(err)
	}
	if o.limits.maxClients != 11 || o.limits.maxKeyLen != 22 || o.limits.maxArgs != 33 || o.limits.protectedMode || o.ops.logFormat != "json" {
		t.Errorf("maxclients %d (file: 11), max-key-len %d (env: 22), max-args %d (flag: 33), protected-mode %v (file: no), log-format %q",
			o.limits.maxClients, o.limits.maxKeyLen, o.limits.maxArgs, o.limits.protectedMode, o.ops.logFormat)
	}
	if o.ops.settings["max-args"] != "33" || o.ops.settings["protected-mode"] != "no" || o.ops.settings["config"] != conf {
		t.Errorf("settings %v", o.ops.settings)
	}
	if _, ok := o.ops.settings["requirepass"]; ok {
		t.Errorf("the password is listed in the settings")
	}
	// RL_CONFIG names the file when no flag does.
	t.Setenv("RL_CONFIG", conf)
	if o, err := parseFlags(nil); err != nil || o.limits.maxClients != 11 {
		t.Errorf("RL_CONFIG: maxclients %d, %v", o.limits.maxClients, err)
	}
}

func TestConfigFileErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ body, want string }{
		{"nosuch 1\n", `line 1: unknown setting "nosuch"`},
		{"\n\nmaxclients lots\n", `line 3: invalid value "lots" for maxclients`},
		{"config other.conf\n", `unknown setting "config"`},
	} {
		conf := filepath.Join(dir, "c.conf")
		os.WriteFile(conf, []byte(c.body), 0o644)
		if _, err := parseFlags([]string{"--config", conf}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.body, err, c.want)
		}
	}
	if _, err := parseFlags([]string{"--config", filepath.Join(dir, "missing.conf")}); err == nil {
		t.Errorf("a missing config file is accepted")
	}
}

func TestConfigPath(t *testing.T) {
	t.Setenv("RL_CONFIG", "env.conf")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--config", "a.conf"}, "a.conf"},
		{[]string{"-config=b.conf"}, "b.conf"},
		{[]string{"--addr", "x", "--config=c.conf"}, "c.conf"},
		{nil, "env.conf"},
		{[]string{"--", "--config", "d.conf"}, "env.conf"},
	} {
		if got := configPath(c.args); got != c.want {
			t.Errorf("configPath(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}
