package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestReleaseBinaryHasNoTestHooks: a build without tags carries none of the
// test hooks' environment variables; the rlserver_testhooks build (the end-
// to-end tests' binary) does, which shows the search would find them.
func TestReleaseBinaryHasNoTestHooks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rlserver twice")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	dir := t.TempDir()
	build := func(name string, tags ...string) []byte {
		t.Helper()
		bin := filepath.Join(dir, name)
		args := append([]string{"build", "-o", bin}, tags...)
		cmd := exec.Command(goBin, append(args, ".")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %v: %v\n%s", args, err, out)
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	const hookPrefix = "RLSERVER_TEST_"
	if b := build("rlserver"); bytes.Contains(b, []byte(hookPrefix)) {
		t.Errorf("the binary built without tags contains %q: a test hook is compiled into production code", hookPrefix)
	}
	b := build("rlserver-testhooks", "-tags", "rlserver_testhooks")
	for _, name := range []string{"RLSERVER_TEST_REMOTE_IP", "RLSERVER_TEST_CRASH_BEFORE_RENAME"} {
		if !bytes.Contains(b, []byte(name)) {
			t.Errorf("the rlserver_testhooks binary lacks %s", name)
		}
	}
}
