package clienttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// mountTmpfs mounts a tmpfs of size (mount's size= syntax) on dir and
// unmounts it at cleanup, after the cleanups registered later (servers
// that use it stop first). Mounting needs root: without it the test
// skips, or fails under CI=true.
func mountTmpfs(t *testing.T, dir, size string) {
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

// fillUp writes a file in dir until its file system is full, and returns
// its path.
func fillUp(t *testing.T, dir string) string {
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
