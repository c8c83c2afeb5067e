package clienttest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClusterLogFormat pins issue 16 point 15: in cluster mode every line
// on stdout and stderr, Raft's own included (they carry logger=raft), is in
// the server's --log-format with its time, level and msg keys (Raft used to
// print hclog's own format: "[INFO]  raft: ..." or JSON with "@level"), and
// a clean SIGINT of a node, the leader (which hands leadership over first)
// or a follower, logs no line at level ERROR.
func TestClusterLogFormat(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			c := startCluster(t, serverBin, "--log-level", "info", "--log-format", format)
			// What each node printed after its SIGINT: start-up may log
			// errors (a node campaigns before its peers have started and
			// cannot dial them), the shutdown itself must not.
			type stop struct {
				s               *server
				stderrAt, outAt int
			}
			var stopped []stop
			sigint := func(n *cnode) {
				t.Helper()
				s := n.srv
				stopped = append(stopped, stop{s, len(s.stderr.String()), len(s.stdout.String())})
				s.signal(syscall.SIGINT)
				code, err := s.wait(10 * time.Second)
				if err != nil || code != 0 {
					t.Fatalf("node %s after SIGINT: exit %d, %v\nstderr:\n%s", n.id, code, err, s.stderr)
				}
				n.srv = nil
			}
			var all []*server
			for _, n := range c.nodes {
				all = append(all, n.srv)
			}

			leader := c.waitLeader(10 * time.Second)
			sigint(leader)
			next := c.waitLeader(10 * time.Second)
			for _, n := range c.live() {
				if n != next {
					sigint(n)
				}
			}
			c.stop(next)

			raftLines, elections := 0, 0
			for i, s := range all {
				for _, out := range []string{s.stdout.String(), s.stderr.String()} {
					for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
						if line == "" || strings.HasPrefix(line, "SCHED ") {
							// The runtime's own scheduler trace line,
							// printed once per 24.8 days of uptime with
							// the server's GODEBUG (internal/sysmon).
							continue
						}
						kv, err := parseLogLine(format, line)
						if err != nil {
							t.Errorf("node %s: %v: %q", c.nodes[i].id, err, line)
							continue
						}
						if kv["logger"] == "raft" {
							raftLines++
							if kv["msg"] == "election won" || kv["msg"] == "entering leader state" {
								elections++
							}
						}
					}
				}
			}
			if raftLines == 0 || elections == 0 {
				t.Errorf("%d lines from Raft, %d of them about an election won; want some of each", raftLines, elections)
			}
			for _, st := range stopped {
				after := st.s.stderr.String()[st.stderrAt:] + st.s.stdout.String()[st.outAt:]
				for _, line := range strings.Split(after, "\n") {
					kv, _ := parseLogLine(format, line)
					if kv["level"] == "ERROR" || strings.Contains(line, "[ERROR]") || strings.Contains(line, `"@level":"error"`) {
						t.Errorf("a clean SIGINT logged an error: %s", line)
					}
				}
			}
		})
	}
}

// parseLogLine reads one line of slog's JSON or text output and requires
// time (a timestamp), level and msg, in that order for text.
func parseLogLine(format, line string) (map[string]string, error) {
	kv := map[string]string{}
	var keys []string
	if format == "json" {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			return nil, fmt.Errorf("not JSON: %v", err)
		}
		for k, v := range m {
			if s, ok := v.(string); ok {
				kv[k] = s
			} else {
				kv[k] = fmt.Sprint(v)
			}
		}
		keys = []string{"time", "level", "msg"}
	} else {
		rest := line
		for rest != "" {
			k, v, ok := strings.Cut(rest, "=")
			if !ok || k == "" || strings.ContainsAny(k, " \"") {
				return nil, fmt.Errorf("not key=value at %q", rest)
			}
			if strings.HasPrefix(v, `"`) {
				q, err := strconv.QuotedPrefix(v)
				if err != nil {
					return nil, fmt.Errorf("bad quoted value for %s", k)
				}
				rest = v[len(q):]
				v, _ = strconv.Unquote(q)
			} else {
				if i := strings.IndexByte(v, ' '); i >= 0 {
					v, rest = v[:i], v[i:]
				} else {
					rest = ""
				}
			}
			if rest != "" && !strings.HasPrefix(rest, " ") {
				return nil, fmt.Errorf("no space after %s's value", k)
			}
			rest = strings.TrimPrefix(rest, " ")
			if _, dup := kv[k]; dup {
				return nil, fmt.Errorf("key %s twice", k)
			}
			kv[k] = v
			keys = append(keys, k)
		}
		if len(keys) < 3 {
			return nil, fmt.Errorf("fewer than three keys")
		}
	}
	for i, want := range []string{"time", "level", "msg"} {
		if _, ok := kv[want]; !ok || keys[i] != want {
			return nil, fmt.Errorf("no %s key in place %d", want, i+1)
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, kv["time"]); err != nil {
		return nil, fmt.Errorf("time %q: %v", kv["time"], err)
	}
	switch kv["level"] {
	case "DEBUG", "INFO", "WARN", "ERROR":
	default:
		return nil, fmt.Errorf("level %q", kv["level"])
	}
	return kv, nil
}
