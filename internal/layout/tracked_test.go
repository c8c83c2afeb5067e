package layout

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// maxTracked is the largest file git may track: source, docs and test data
// stay far below it, and a build output (the server is some 20 MB) does not.
const maxTracked = 1 << 20

// moduleRoot is the repository's root, two folders up from this package.
func moduleRoot(t *testing.T) string {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// git runs git in the module's root. When git or the repository's history
// is not there (a Docker build context, a source archive), the test cannot
// check what is tracked: it fails under CI=true, where it must check, and
// otherwise skips, saying why.
func git(t *testing.T, stdin io.Reader, args ...string) []byte {
	t.Helper()
	why := ""
	if _, err := exec.LookPath("git"); err != nil {
		why = "git is not installed"
	} else if out, err := exec.Command("git", "-C", moduleRoot(t), "rev-parse", "--git-dir").CombinedOutput(); err != nil {
		why = fmt.Sprintf("%s is not a git checkout (%s)", moduleRoot(t), bytes.TrimSpace(out))
	}
	if why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("cannot check the tracked files: %s; CI must run in a git checkout", why)
		}
		t.Skipf("cannot check the tracked files: %s", why)
	}
	cmd := exec.Command("git", append([]string{"-C", moduleRoot(t)}, args...)...)
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

type tracked struct {
	path, mode, object string
}

// trackedFiles lists the files in git's index under the module's root.
func trackedFiles(t *testing.T) []tracked {
	var files []tracked
	for _, rec := range bytes.Split(git(t, nil, "ls-files", "-z", "--stage"), []byte{0}) {
		// "<mode> <object> <stage>\t<path>"
		meta, path, ok := strings.Cut(string(rec), "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			continue
		}
		files = append(files, tracked{path: path, mode: f[0], object: f[1]})
	}
	if len(files) == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("git tracks no file under the module's root")
		}
		t.Skip("cannot check the tracked files: git tracks no file under the module's root")
	}
	return files
}

// TestNoBuildOutputsTracked: no tracked file is a compiled program (ELF,
// Mach-O or PE, whatever its mode), no file has the executable bit unless
// it is a text script starting with #!, and none is over 1 MB. Regression
// (issue 31): a 21 MB rlserver binary and bench/compare/compare were
// committed by mistake, and every clone downloaded them.
func TestNoBuildOutputsTracked(t *testing.T) {
	files := trackedFiles(t)
	var blobs []tracked
	var ids strings.Builder
	for _, f := range files {
		if f.mode == "100644" || f.mode == "100755" { // not symlinks or submodules
			blobs = append(blobs, f)
			ids.WriteString(f.object + "\n")
		}
	}
	// The index's contents, not the working tree's: what a commit holds.
	cmd := exec.Command("git", "-C", moduleRoot(t), "cat-file", "--batch")
	cmd.Stdin = strings.NewReader(ids.String())
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReaderSize(pipe, 1<<16)
	head := make([]byte, 4096)
	for _, f := range blobs {
		// "<object> blob <size>\n<contents>\n"
		line, err := r.ReadString('\n')
		fields := strings.Fields(line)
		if err != nil || len(fields) != 3 {
			t.Fatalf("git cat-file --batch: %q, %v", line, err)
		}
		size, _ := strconv.ParseInt(fields[2], 10, 64)
		n, _ := io.ReadFull(r, head[:min(size, int64(len(head)))])
		if _, err := io.CopyN(io.Discard, r, size-int64(n)+1); err != nil {
			t.Fatalf("git cat-file --batch: %v", err)
		}
		if why := buildOutput(f.mode, size, head[:n]); why != "" {
			t.Errorf("%s is tracked but %s: git rm --cached it, delete it and list it in .gitignore (and .dockerignore)", f.path, why)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}

// buildOutput says why a tracked file of this mode and size, starting with
// head (its first 4 KB, or all of it), is not source, or "" when it is.
func buildOutput(mode string, size int64, head []byte) string {
	switch {
	case size > maxTracked:
		return fmt.Sprintf("%d bytes (over 1 MB)", size)
	case bytes.HasPrefix(head, []byte("\x7fELF")):
		return "an ELF executable"
	case len(head) >= 4 && machOMagic[binary.BigEndian.Uint32(head)]:
		return "a Mach-O executable"
	case isPE(head):
		return "a PE (Windows) executable"
	case mode == "100755" && !(bytes.HasPrefix(head, []byte("#!")) && !bytes.ContainsRune(head, 0)):
		return "executable (mode 755) and not a text script with a #! line"
	}
	return ""
}

// machOMagic holds the first four bytes of Mach-O files, 32 and 64 bits
// in both byte orders, and of universal (fat) ones.
var machOMagic = map[uint32]bool{
	0xfeedface: true, 0xfeedfacf: true, 0xcefaedfe: true, 0xcffaedfe: true, 0xcafebabe: true,
}

// isPE reports an MZ header whose pointer at 0x3c leads to "PE\0\0", or
// points past head (a DOS stub that long is an executable too).
func isPE(head []byte) bool {
	if !bytes.HasPrefix(head, []byte("MZ")) || len(head) < 0x40 {
		return false
	}
	off := int64(binary.LittleEndian.Uint32(head[0x3c:]))
	return off+4 > int64(len(head)) || string(head[off:off+4]) == "PE\x00\x00"
}

// TestBuildOutputsIgnored: go build's output of every program of the module
// (in the program's folder, and the server's in the repository's root) and
// make build's binary are listed in .gitignore, so that git add cannot pick
// them up; deploy/docs_test.go checks that .dockerignore lists the same.
func TestBuildOutputsIgnored(t *testing.T) {
	root := moduleRoot(t)
	out, err := exec.Command("go", "list", "-f", `{{if eq .Name "main"}}{{.Dir}}{{end}}`, module+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	want := []string{"bin/rlserver", "rlserver"}
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, filepath.ToSlash(filepath.Join(rel, filepath.Base(dir))))
	}
	ignored := map[string]bool{}
	stdin := strings.NewReader(strings.Join(want, "\n") + "\n")
	// check-ignore exits 1 when it lists nothing; git fails the test then.
	for _, p := range strings.Fields(string(git(t, stdin, "check-ignore", "--no-index", "--stdin"))) {
		ignored[p] = true
	}
	for _, p := range want {
		if !ignored[p] {
			t.Errorf("%s (a build output) is not listed in .gitignore", p)
		}
	}
}

// TestBuildOutputKinds: the kinds of file TestNoBuildOutputsTracked
// refuses, from their first bytes, mode and size.
func TestBuildOutputKinds(t *testing.T) {
	pe := make([]byte, 0x80)
	copy(pe, "MZ")
	binary.LittleEndian.PutUint32(pe[0x3c:], 0x40)
	copy(pe[0x40:], "PE\x00\x00")
	notPE := append([]byte(nil), pe...)
	copy(notPE[0x40:], "text")
	for _, tc := range []struct {
		name, mode string
		size       int64
		head       []byte
		refused    bool
	}{
		{"source", "100644", 100, []byte("package main\n"), false},
		{"script", "100755", 100, []byte("#!/bin/sh\necho hi\n"), false},
		{"ELF", "100755", 100, []byte("\x7fELF\x02\x01\x01"), true},
		{"ELF without the executable bit", "100644", 100, []byte("\x7fELF\x02\x01\x01"), true},
		{"Mach-O 64", "100644", 100, []byte("\xcf\xfa\xed\xfe"), true},
		{"Mach-O universal", "100644", 100, []byte("\xca\xfe\xba\xbe"), true},
		{"PE", "100644", int64(len(pe)), pe, true},
		{"MZ text", "100644", int64(len(notPE)), notPE, false},
		{"executable without #!", "100755", 100, []byte("echo hi\n"), true},
		{"#! with a NUL", "100755", 100, []byte("#!\x00\x01"), true},
		{"over 1 MB", "100644", maxTracked + 1, []byte("package main\n"), true},
		{"1 MB", "100644", maxTracked, []byte("package main\n"), false},
	} {
		if why := buildOutput(tc.mode, tc.size, tc.head); (why != "") != tc.refused {
			t.Errorf("%s: buildOutput = %q, want refused %v", tc.name, why, tc.refused)
		}
	}
}
