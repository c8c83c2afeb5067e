package clienttest

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The README's examples and figures, checked against the server and
// against each other, so the docs say what the server does.

// consoleBlocks returns the ```console blocks of a Markdown file, each as
// its lines.
func consoleBlocks(t *testing.T, path string) [][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks [][]string
	var cur []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case !in && strings.HasPrefix(line, "```console"):
			in, cur = true, nil
		case in && strings.HasPrefix(line, "```"):
			in = false
			blocks = append(blocks, cur)
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

// cliExample is one `$ redis-cli ...` line of a console block and the
// reply lines printed under it.
type cliExample struct {
	args []string
	want []string
}

var exampleReply = regexp.MustCompile(`^\d+\) \(integer\) (-?\d+)`)

// parseCLIExamples reads a block made only of plain `$ redis-cli CMD ...`
// lines (no host, port or password flags) and their integer replies; ok
// is false for any other block (it needs a set-up the test cannot guess).
func parseCLIExamples(block []string) (examples []cliExample, ok bool) {
	for _, line := range block {
		if cmd, found := strings.CutPrefix(line, "$ redis-cli "); found {
			if c, _, cut := strings.Cut(cmd, "#"); cut {
				cmd = c
			}
			args := strings.Fields(cmd)
			if len(args) == 0 || strings.HasPrefix(args[0], "-") {
				return nil, false
			}
			examples = append(examples, cliExample{args: args})
			continue
		}
		m := exampleReply.FindStringSubmatch(line)
		if m == nil || len(examples) == 0 {
			return nil, false
		}
		last := &examples[len(examples)-1]
		last.want = append(last.want, m[1])
	}
	return examples, len(examples) > 0
}

// sameReply compares one reply integer with the printed one. Counts and
// flags must match exactly; durations of 100 ms or more count down while
// the block runs (each redis-cli call starts a process), so they may be
// short of the printed value by the block's elapsed milliseconds, and by
// at least a tenth.
func sameReply(got, want string, elapsed time.Duration) bool {
	if got == want {
		return true
	}
	g, err1 := strconv.ParseInt(got, 10, 64)
	w, err2 := strconv.ParseInt(want, 10, 64)
	if err1 != nil || err2 != nil || w < 100 {
		return false
	}
	slack := max(w/10, elapsed.Milliseconds()+1)
	return g <= w && g >= w-slack
}

// TestReadmeConsoleExamples runs every README console block that is
// made of plain redis-cli calls against a fresh server and compares the
// replies with the ones printed. A block whose replies differ is run
// again on a new server, up to three times in all: on a loaded machine
// the pauses between calls can refill a token, which the printed replies
// (taken on an idle one) do not show.
func TestReadmeConsoleExamples(t *testing.T) {
	t.Parallel()
	ran := 0
	for _, block := range consoleBlocks(t, "../README.md") {
		examples, ok := parseCLIExamples(block)
		if !ok {
			continue
		}
		var diffs []string
		for range 3 {
			diffs = runCLIBlock(t, examples)
			if len(diffs) == 0 {
				break
			}
			t.Logf("a README block differed; again on a new server: %s", strings.Join(diffs, "; "))
		}
		for _, d := range diffs {
			t.Error(d)
		}
		for _, ex := range examples {
			if len(ex.want) > 0 {
				ran++
			}
		}
	}
	if ran < 5 {
		t.Fatalf("checked %d README examples with printed replies, want at least 5 (Try it and Algorithms)", ran)
	}
}

// runCLIBlock runs one block's calls on a fresh server and returns how
// each reply that differs from the printed one differs.
func runCLIBlock(t *testing.T, examples []cliExample) (diffs []string) {
	s := start(t, opts{})
	defer s.stop()
	began := time.Now()
	for _, ex := range examples {
		out, errOut, code := cli(t, s, "", ex.args...)
		if code != 0 || strings.HasPrefix(out, "ERR") {
			t.Fatalf("redis-cli %s: exit %d, %q %q", strings.Join(ex.args, " "), code, out, errOut)
		}
		got := strings.Fields(out)
		if len(ex.want) == 0 {
			continue
		}
		if len(got) != len(ex.want) {
			diffs = append(diffs, fmt.Sprintf("redis-cli %s: got %q, README prints %q", strings.Join(ex.args, " "), got, ex.want))
			continue
		}
		elapsed := time.Since(began)
		for i := range got {
			if !sameReply(got[i], ex.want[i], elapsed) {
				diffs = append(diffs, fmt.Sprintf("redis-cli %s: reply %d is %s, README prints %s (%v into the block)",
					strings.Join(ex.args, " "), i+1, got[i], ex.want[i], elapsed.Round(time.Millisecond)))
			}
		}
	}
	return diffs
}

// TestMemoryFiguresAgree: the per-key figures in README's algorithm
// table, README's memory paragraph and docs/memory.md are one set.
func TestMemoryFiguresAgree(t *testing.T) {
	t.Parallel()
	readme := readText(t, "../README.md")
	memory := readText(t, "../docs/memory.md")
	flatReadme := strings.Join(strings.Fields(readme), " ")

	// Engine bytes per key (go run ./bench/memkeys).
	rows := []struct{ readmeRow, memoryRow string }{
		{"| `RL.ALLOW key capacity rate [cost]` (token bucket", "| token bucket, `RL.SHAPE` |"},
		{"| `CL.THROTTLE key", "| token bucket, `RL.SHAPE` |"},
		{"| `GCRA key", "| token bucket, `RL.SHAPE` |"},
		{"| `RL.SHAPE key", "| token bucket, `RL.SHAPE` |"},
		{"| `RL.FIXED key", "| `RL.FIXED` |"},
		{"| `RL.SLIDING key", "| `RL.SLIDING` |"},
		{"| `RL.LOG key", "| `RL.LOG` |"},
	}
	readmeFigure := regexp.MustCompile(`(\d+) B/key`)
	memoryFigure := regexp.MustCompile(`\| (\d+)`)
	for _, r := range rows {
		a := readmeFigure.FindStringSubmatch(lineStarting(t, readme, r.readmeRow))
		b := memoryFigure.FindStringSubmatch(strings.TrimPrefix(lineStarting(t, memory, r.memoryRow), r.memoryRow[:len(r.memoryRow)-1]))
		if a == nil || b == nil || a[1] != b[1] {
			t.Errorf("%s: README says %v B/key, docs/memory.md says %v", r.readmeRow, a, b)
		}
		if a != nil && !strings.Contains(flatReadme, " "+a[1]+" per ") && !strings.Contains(flatReadme, " "+a[1]+" resident bytes") {
			t.Errorf("README's memory paragraph does not give %s B/key for %s", a[1], r.readmeRow)
		}
	}

	// engine/DESIGN.md gives the token bucket's figure for compact keys.
	design := strings.Join(strings.Fields(readText(t, "../engine/DESIGN.md")), " ")
	tokenBucket := readmeFigure.FindStringSubmatch(lineStarting(t, readme, rows[0].readmeRow))
	d := regexp.MustCompile(`compact keys still cost .*?\((\d+) B/key at a million keys`).FindStringSubmatch(design)
	switch {
	case d == nil:
		t.Error("engine/DESIGN.md no longer says what compact keys cost (\"(N B/key at a million keys\")")
	case tokenBucket != nil && d[1] != tokenBucket[1]:
		t.Errorf("engine/DESIGN.md says %s B/key for compact keys, README %s", d[1], tokenBucket[1])
	}

	// The whole process against Redis + Lua (make bench-compare).
	m := regexp.MustCompile("resident memory per key, 1,000,000 keys \\| ([0-9.-]+) B \\| ([0-9.-]+) B").FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("README's performance table has no resident memory row")
	}
	rl, redis := m[1], m[2]
	if !strings.Contains(flatReadme, rl+" B per token-bucket key against "+redis+" B") {
		t.Errorf("README's memory paragraph does not give %s B against Redis's %s B", rl, redis)
	}
	flat := strings.Join(strings.Fields(memory), " ")
	if !strings.Contains(flat, rl+" bytes per key for rlserver against "+redis+" for Redis") {
		t.Errorf("docs/memory.md does not give %s B against Redis's %s B", rl, redis)
	}
}

func readText(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func lineStarting(t *testing.T, text, prefix string) string {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	t.Fatalf("no line starts with %q", prefix)
	return ""
}
