package clienttest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// A network lab for the fault tests: one network namespace per cluster
// node, each with a veth to a bridge in the root namespace, and an
// nftables table in each namespace that the tests fill with drop rules to
// cut links or lose packets. The test process reaches the nodes through
// the bridge. Everything is named after the test's pid and a counter, and
// removed at cleanup (after the cluster that runs in it stops).

var labSeq atomic.Int32

type netLab struct {
	t      *testing.T
	bridge string
	hostIP string   // the bridge's address: where clients come from
	ns     []string // namespace of node i
	ips    []string // address of node i
}

// newNetLab creates the bridge and n namespaces. It needs root, ip and nft:
// without them the test skips, or fails under CI=true.
func newNetLab(t *testing.T, n int) *netLab {
	t.Helper()
	need := func(format string, args ...any) {
		if os.Getenv("CI") != "" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	if os.Geteuid() != 0 {
		need("network namespaces need root")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			need("%s not installed (iproute2, nftables): %v", tool, err)
		}
	}
	seq := int(labSeq.Add(1))
	pid := os.Getpid()
	tag := fmt.Sprintf("%d%c", pid%100000, 'a'+rune(seq%26))
	// A subnet no bridge on the host has: a lab left behind by a killed
	// test run keeps its bridge, and the same subnet would route there.
	used, _ := exec.Command("ip", "-br", "addr").Output()
	subnet := ""
	for k := range 250 {
		subnet = fmt.Sprintf("10.213.%d", (pid+seq*7+k)%250+1)
		if !strings.Contains(string(used), " "+subnet+".1/") {
			break
		}
	}
	l := &netLab{t: t, bridge: "rlb" + tag, hostIP: subnet + ".1"}
	t.Cleanup(l.remove)
	l.must("ip", "link", "add", l.bridge, "type", "bridge")
	l.must("ip", "addr", "add", l.hostIP+"/24", "dev", l.bridge)
	l.must("ip", "link", "set", l.bridge, "up")
	for i := range n {
		ns := fmt.Sprintf("rl%sn%d", tag, i+1)
		ip := fmt.Sprintf("%s.%d", subnet, 10+i+1)
		host, peer := fmt.Sprintf("rv%sn%d", tag, i+1), fmt.Sprintf("rp%sn%d", tag, i+1)
		l.must("ip", "netns", "add", ns)
		l.ns, l.ips = append(l.ns, ns), append(l.ips, ip)
		l.must("ip", "link", "add", host, "type", "veth", "peer", "name", peer, "netns", ns)
		l.must("ip", "link", "set", host, "master", l.bridge, "up")
		l.in(i, "ip", "link", "set", "lo", "up")
		l.in(i, "ip", "addr", "add", ip+"/24", "dev", peer)
		l.in(i, "ip", "link", "set", peer, "up")
		l.in(i, "nft", "add table inet rlf; "+
			"add chain inet rlf in { type filter hook input priority 0; }; "+
			"add chain inet rlf out { type filter hook output priority 0; }")
	}
	return l
}

// nodes returns cluster nodes for the lab: node i listens on its
// namespace's address and runs under ip netns exec, with protected mode
// off since its clients are not on its loopback.
func (l *netLab) nodes() []*cnode {
	var out []*cnode
	for i, ns := range l.ns {
		out = append(out, &cnode{
			id:       fmt.Sprintf("n%d", i+1),
			respAddr: net.JoinHostPort(l.ips[i], "6379"),
			raftAddr: net.JoinHostPort(l.ips[i], "7000"),
			dir:      l.t.TempDir(),
			wrap:     []string{"ip", "netns", "exec", ns},
			args:     []string{"--protected-mode=false"}, // clients come from the bridge
		})
	}
	return out
}

func (l *netLab) must(name string, args ...string) {
	l.t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		l.t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// in runs a command inside node i's namespace.
func (l *netLab) in(i int, name string, args ...string) {
	l.t.Helper()
	l.must("ip", append([]string{"netns", "exec", l.ns[i], name}, args...)...)
}

// cut drops every packet between nodes a and b, both ways; the other links
// stay up.
func (l *netLab) cut(a, b int) {
	l.t.Helper()
	for _, p := range [][2]int{{a, b}, {b, a}} {
		l.in(p[0], "nft", "add rule inet rlf in ip saddr "+l.ips[p[1]]+" drop; "+
			"add rule inet rlf out ip daddr "+l.ips[p[1]]+" drop")
	}
}

// cutHost drops every packet between node i and the root namespace, where
// the clients are.
func (l *netLab) cutHost(i int) {
	l.t.Helper()
	l.in(i, "nft", "add rule inet rlf in ip saddr "+l.hostIP+" drop; "+
		"add rule inet rlf out ip daddr "+l.hostIP+" drop")
}

// split cuts every link between the group and the other nodes.
func (l *netLab) split(group []int) {
	l.t.Helper()
	for i := range l.ns {
		inGroup := false
		for _, g := range group {
			inGroup = inGroup || g == i
		}
		if !inGroup {
			for _, g := range group {
				l.cut(g, i)
			}
		}
	}
}

// lose drops pct percent of the packets every namespace receives, chosen
// at random per packet: each link loses that share in each direction, and
// so does the path from the clients to each node.
func (l *netLab) lose(pct int) {
	l.t.Helper()
	for i := range l.ns {
		l.in(i, "nft", "add rule inet rlf in numgen random mod 100 < "+strconv.Itoa(pct)+" drop")
	}
}

// heal removes every rule.
func (l *netLab) heal() {
	l.t.Helper()
	for i := range l.ns {
		l.in(i, "nft", "flush chain inet rlf in; flush chain inet rlf out")
	}
}

// remove deletes the namespaces (which deletes their veths and the rules)
// and the bridge. Errors are reported, not fatal, so every part is tried.
func (l *netLab) remove() {
	for _, ns := range l.ns {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			l.t.Errorf("ip netns del %s: %v: %s", ns, err, out)
		}
	}
	if out, err := exec.Command("ip", "link", "del", l.bridge).CombinedOutput(); err != nil {
		l.t.Errorf("ip link del %s: %v: %s", l.bridge, err, out)
	}
}
