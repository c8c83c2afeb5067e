// Package testfs gives tests file systems that fill up: a tmpfs of a
// given size mounted for one test, and a file that fills it. Mounting
// needs root: without it a test skips, or fails when CI is set (CI
// installs and runs as root, so a skip there would hide a broken test).
package testfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// MountTmpfs mounts a tmpfs of size (mount's size= syntax, such as "1m")
// on dir and unmounts it at cleanup, after the cleanups registered later
// (so servers that use it stop first).
func MountTmpfs(t testing.TB, dir, size string) {
	t.Helper()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("mount tmpfs: %v: %s", err, out)
		}
		t.Skipf("mount tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// FillUp writes a file in dir until its file system is full, and returns
// its path (remove it to free the space).
func FillUp(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 256<<10)
	for range 1024 { // 256 MiB: far more than the tmpfs the tests mount
		if _, err := f.Write(buf); err != nil {
			return path
		}
	}
	t.Fatal("the tmpfs never filled")
	return ""
}
