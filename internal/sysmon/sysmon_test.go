package sysmon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestWithSetting(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string // nil: left as it is
	}{
		{[]string{"PATH=/bin"}, []string{"GODEBUG=" + Setting, "PATH=/bin"}},
		{[]string{"GODEBUG=", "A=1"}, []string{"GODEBUG=" + Setting, "A=1"}},
		{[]string{"A=1", "GODEBUG=madvdontneed=1", "B=2"}, []string{"GODEBUG=madvdontneed=1," + Setting, "A=1", "B=2"}},
		// The runtime reads the first GODEBUG; a later one is dropped.
		{[]string{"GODEBUG=x=1", "GODEBUG=schedtrace=5"}, []string{"GODEBUG=x=1," + Setting}},
		{[]string{"GODEBUG=schedtrace=0"}, nil},
		{[]string{"GODEBUG=gctrace=1,schedtrace=1000", "A=1"}, nil},
		{[]string{"XGODEBUG=schedtrace=0"}, []string{"GODEBUG=" + Setting, "XGODEBUG=schedtrace=0"}},
	} {
		got, ok := withSetting(tc.in)
		if ok != (tc.want != nil) || !slices.Equal(got, tc.want) {
			t.Errorf("withSetting(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}

// TestMain runs the child of TestKeepAwakeKeepsName when asked: KeepAwake,
// then the name, argv[0] and GODEBUG the process ends up with.
func TestMain(m *testing.M) {
	if os.Getenv("SYSMON_TEST_CHILD") == "1" {
		KeepAwake()
		comm, err := os.ReadFile("/proc/self/comm")
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		cmdline, _ := os.ReadFile("/proc/self/cmdline")
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		fmt.Printf("%s\n%s\n%s\n", strings.TrimSpace(string(comm)), argv0, os.Getenv("GODEBUG"))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestKeepAwakeKeepsName: a program started through a symlink keeps the
// symlink's name after KeepAwake re-executes it (/proc/<pid>/comm, which
// ps shows and pgrep matches, and argv[0] in /proc/<pid>/cmdline), and
// runs with the setting. Regression (issue 31): it re-executed the
// symlink's target, and ps and pgrep showed the target's name.
func TestKeepAwakeKeepsName(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	link := filepath.Join(dir, "rl-link") // under comm's 15 bytes
	if err := os.Symlink(self, link); err != nil {
		t.Fatal(err)
	}
	env := []string{"SYSMON_TEST_CHILD=1"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GODEBUG=") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	for _, tc := range []struct {
		name, argv0, path string
		wantComm          string
	}{
		{"by path", link, "", "rl-link"},
		{"through PATH", "rl-link", dir, "rl-link"},
		// argv[0] that is not the program: the target's name, as before.
		{"argv[0] elsewhere", "/nonexistent/other", "", filepath.Base(self)[:min(15, len(filepath.Base(self)))]},
	} {
		cmd := exec.Command(link)
		cmd.Args[0] = tc.argv0
		cmd.Env = append(env, "PATH="+tc.path)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.name, err, out)
		}
		got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		if len(got) != 3 || got[0] != tc.wantComm || got[1] != tc.argv0 || got[2] != Setting {
			t.Errorf("%s: comm, argv[0], GODEBUG = %q; want %q, %q, %q", tc.name, got, tc.wantComm, tc.argv0, Setting)
		}
	}
}
