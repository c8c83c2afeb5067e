package clienttest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// --join through members that speak TLS only and require a password or an
// ACL user (issue 7), and Raft snapshot metrics (issue 8), with real
// processes.

// secureNode is one cluster member started by these tests, reached over
// TLS with a password.
type secureNode struct {
	id, respAddr, raftAddr string
	srv                    *server
	client                 *redis.Client // TLS, authenticated as the default user
}

// secureCluster runs nodes whose client port serves TLS only.
type secureCluster struct {
	t      *testing.T
	tlsCfg *tls.Config // the tests' client side: trusts the CA, presents a certificate
	pass   string
	nodes  []*secureNode
}

// launch starts a node with args (its addresses and --dir added) and waits
// until it answers PING over TLS with the password.
func (c *secureCluster) launch(id string, args ...string) *secureNode {
	c.t.Helper()
	return c.launchAt(id, net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(c.t))),
		net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(c.t))), args...)
}

// launchAt is launch with chosen addresses (members of a --peers list).
func (c *secureCluster) launchAt(id, respAddr, raftAddr string, args ...string) *secureNode {
	c.t.Helper()
	n := &secureNode{id: id, respAddr: respAddr, raftAddr: raftAddr}
	s := &server{t: c.t, addr: n.respAddr, dir: c.t.TempDir(), stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan struct{})}
	all := append([]string{"--node-id", id, "--addr", n.respAddr, "--raft-addr", n.raftAddr, "--dir", s.dir, "--log-level", "warn"}, args...)
	s.cmd = exec.Command(binary(), all...)
	s.cmd.Env = cleanEnv()
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	if err := s.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() {
		s.cmd.Wait()
		s.state = s.cmd.ProcessState
		close(s.exited)
	}()
	c.t.Cleanup(func() {
		code, err := s.stop()
		if err != nil || code != 0 {
			c.t.Errorf("node %s: exit %d, %v", id, code, err)
		}
		if out := s.stderr.String(); strings.Contains(out, "WARNING: DATA RACE") || strings.Contains(out, "panic:") || c.t.Failed() {
			c.t.Logf("node %s stderr:\n%s", id, out)
			if !c.t.Failed() {
				c.t.Errorf("node %s reported a race or a panic", id)
			}
		}
	})
	n.srv = s
	n.client = redis.NewClient(&redis.Options{Addr: n.respAddr, TLSConfig: c.tlsCfg, Password: c.pass, Protocol: 2,
		MaxRetries: -1, DisableIdentity: true, DialTimeout: time.Second, ReadTimeout: 5 * time.Second})
	c.t.Cleanup(func() { n.client.Close() })
	ctx := context.Background()
	ready := pollFor(readyTimeout, func() bool {
		select {
		case <-s.exited:
			return true
		default:
		}
		info, err := n.client.Info(ctx, "server").Result()
		return err == nil && strings.Contains(info, "process_id:"+strconv.Itoa(s.cmd.Process.Pid)+"\r\n")
	})
	select {
	case <-s.exited:
		c.t.Fatalf("node %s exited: %v\nstderr:\n%s", id, s.state, s.stderr)
	default:
	}
	if !ready {
		c.t.Fatalf("node %s: no PING over TLS within %v\nstderr:\n%s", id, readyTimeout, s.stderr)
	}
	c.nodes = append(c.nodes, n)
	return n
}

// leaderOf is the leader n knows, "" for none.
func (c *secureCluster) leaderOf(n *secureNode) string {
	v, err := n.client.Do(context.Background(), "RL.CLUSTER", "LEADER").Slice()
	if err != nil || len(v) != 3 {
		return ""
	}
	id, _ := v[0].(string)
	return id
}

// waitLeader waits until every node names the same leader and returns it.
func (c *secureCluster) waitLeader() *secureNode {
	c.t.Helper()
	var leader *secureNode
	pollUntil(c.t, 20*time.Second, "every node to agree on a leader", func() bool {
		id := ""
		for _, n := range c.nodes {
			l := c.leaderOf(n)
			if l == "" || id != "" && l != id {
				return false
			}
			id = l
		}
		for _, n := range c.nodes {
			if n.id == id {
				leader = n
			}
		}
		return leader != nil
	})
	return leader
}

// converge waits until every node reports the same applied index and
// digest.
func (c *secureCluster) converge() {
	c.t.Helper()
	var seen string
	if !pollFor(20*time.Second, func() bool {
		seen = ""
		first := ""
		for _, n := range c.nodes {
			v, err := n.client.Do(context.Background(), "RL.CLUSTER", "DIGEST").Slice()
			if err != nil || len(v) != 2 {
				seen += fmt.Sprintf(" %s:%v", n.id, err)
				return false
			}
			d := fmt.Sprint(v...)
			seen += " " + n.id + "=" + d
			if first == "" {
				first = d
			} else if d != first {
				return false
			}
		}
		return true
	}) {
		c.t.Fatalf("nodes did not converge:%s", seen)
	}
}

// joinACL gives the default user --requirepass's password (the file has
// no default line), an operator who may do everything, and an application
// user who may not change membership.
const joinACL = `user ops on >ops-pw ~* &* +@all
user app on >app-pw ~* +@ratelimit +@connection -@dangerous
`

// TestJoinThroughTLSAndPassword: three members that serve clients over TLS
// only (client certificates required), run Raft over mutual TLS and
// require a password; a fourth node joins with --join --join-tls
// authenticating as the default user (its --requirepass), a fifth as an
// ACL user. Joins the member must refuse stop the joining node at once
// with one line naming what was refused and the flags to check.
func TestJoinThroughTLSAndPassword(t *testing.T) {
	t.Parallel()
	p := newPKI(t, "rlserver join CA")
	cert, key := p.issue(t, "node")
	acl := writeFile(t, "users.acl", joinACL)
	c := &secureCluster{t: t, tlsCfg: p.clientTLS(t, cert, key), pass: "cluster-pw"}
	secure := []string{"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", p.caFile, "--tls-cluster",
		"--requirepass", c.pass, "--aclfile", acl, "--commit-timeout", "2s"}

	// Three members from a static peer list: ports are chosen first.
	var ids, resp, raftAddrs []string
	for i := range 3 {
		ids = append(ids, fmt.Sprintf("m%d", i+1))
		resp = append(resp, net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))))
		raftAddrs = append(raftAddrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))))
	}
	var peers []string
	for i := range ids {
		peers = append(peers, ids[i]+"="+raftAddrs[i])
	}
	for i := range ids {
		c.launchAt(ids[i], resp[i], raftAddrs[i], append([]string{"--peers", strings.Join(peers, ",")}, secure...)...)
	}
	leader := c.waitLeader()
	var follower *secureNode
	for _, n := range c.nodes {
		if n != leader {
			follower = n
		}
	}
	ctx := context.Background()
	for i := range 3 {
		if ok, _, err := allowOnce(ctx, follower.client, "joined", 3, 1); err != nil || !ok {
			t.Fatalf("allow %d via a follower: %v %v", i, ok, err)
		}
	}

	// Refused joins: each process exits 1 with one clear line.
	other := newPKI(t, "another CA")
	ocert, okey := other.issue(t, "stranger")
	join := follower.respAddr
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no TLS", []string{"--join", join, "--requirepass", c.pass},
			"rlserver: cannot join the cluster through " + join + ": tls with the member failed: the member serves TLS only on " + join +
				" and this node connected without TLS (check --join-tls, --tls-cert-file, --tls-key-file and --tls-ca-cert-file)\n"},
		{"wrong password", append([]string{"--join", join, "--join-tls", "--join-password", "nope"}, secure[:7]...),
			"rlserver: cannot join the cluster through " + join + ": the member refused the credentials (user \"default\"): " +
				"WRONGPASS invalid username-password pair or user is disabled. (check --join-user and --join-password; the password defaults to --requirepass)\n"},
		{"no password", append([]string{"--join", join, "--join-tls"}, secure[:7]...),
			"rlserver: cannot join the cluster through " + join + ": the member refused the credentials: the member requires a password and none was given: " +
				"NOAUTH Authentication required. (check --join-user and --join-password; the password defaults to --requirepass)\n"},
		{"user without permission", append([]string{"--join", join, "--join-tls", "--join-user", "app", "--join-password", "app-pw"}, secure[:7]...),
			"rlserver: cannot join the cluster through " + join + ": the member refused the join (user \"app\"): " +
				"NOPERM User app has no permissions to run the 'rl.cluster|join' command (the member must be in cluster mode and let the --join user run RL.CLUSTER JOIN: +@all, +@dangerous or +rl.cluster|join)\n"},
		{"client certificate from another CA", []string{"--join", join, "--join-tls", "--requirepass", c.pass, "--tls-cert-file", ocert, "--tls-key-file", okey, "--tls-ca-cert-file", p.caFile},
			"rlserver: cannot join the cluster through " + join + ": tls with the member failed: the member refused this node's TLS connection"},
		{"untrusted member", []string{"--join", join, "--join-tls", "--requirepass", c.pass, "--tls-cert-file", ocert, "--tls-key-file", okey, "--tls-ca-cert-file", other.caFile},
			"rlserver: cannot join the cluster through " + join + ": tls with the member failed: the member's certificate is not trusted: "},
	} {
		args := append([]string{"--node-id", "bad", "--addr", net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))),
			"--raft-addr", net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))), "--dir", t.TempDir(), "--log-level", "error"}, tc.args...)
		start := time.Now()
		_, errOut, code := runBinary(t, nil, args...)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if code != 1 || !strings.HasPrefix(lines[len(lines)-1]+"\n", tc.want) {
			t.Errorf("%s: status %d, stderr\n%s\nwant status 1 and\n%s", tc.name, code, errOut, tc.want)
		}
		t.Logf("%s: exit %d after %v: %s", tc.name, code, time.Since(start).Round(time.Millisecond), lines[len(lines)-1])
	}

	// A fourth node joins through a follower as the default user (its own
	// --requirepass is the cluster's), a fifth as the ops user.
	n4 := c.launch("n4", append([]string{"--join", follower.respAddr, "--join-tls"}, secure...)...)
	n5 := c.launch("n5", append([]string{"--join", leader.respAddr, "--join-tls", "--join-user", "ops", "--join-password", "ops-pw"}, secure...)...)
	for _, n := range []*secureNode{n4, n5} {
		pollUntil(t, 20*time.Second, n.id+" to join", func() bool { return c.leaderOf(n) == leader.id })
	}
	c.converge()
	if got, err := n5.client.ConfigGet(ctx, "join*").Result(); err != nil || got["join-user"] != "ops" || got["join-tls"] != "yes" || strings.Contains(fmt.Sprint(got), "ops-pw") {
		t.Errorf("CONFIG GET join* on n5 = %v, %v: want the user and no password", got, err)
	}
	nodes, err := leader.client.Do(ctx, "RL.CLUSTER", "NODES").Text()
	if err != nil || strings.Count(strings.TrimSpace(nodes), "\n") != 4 || !strings.Contains(nodes, "n4 "+n4.raftAddr) || !strings.Contains(nodes, "n5 "+n5.raftAddr) {
		t.Fatalf("RL.CLUSTER NODES after the joins: %q %v", nodes, err)
	}
	// They hold the state and serve it (forwarded to the leader over TLS).
	for _, n := range []*secureNode{n4, n5} {
		if ok, _, err := allowOnce(ctx, n.client, "joined", 3, 1); err != nil || ok {
			t.Fatalf("%s sees tokens in a drained bucket: %v %v", n.id, ok, err)
		}
		if ok, _, err := allowOnce(ctx, n.client, "fresh-"+n.id, 3, 1); err != nil || !ok {
			t.Fatalf("%s: RL.ALLOW on a fresh key: %v %v", n.id, ok, err)
		}
	}
	c.converge()
}

// TestJoinFlagErrors: the join flags are checked before anything starts.
func TestJoinFlagErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--node-id", "n1", "--join-tls"}, "rlserver: --join-user, --join-password and --join-tls need --join\n"},
		{[]string{"--node-id", "n1", "--join", "127.0.0.1:1", "--join-user", "ops"}, "rlserver: --join-user needs --join-password\n"},
		{[]string{"--node-id", "n1", "--snapshot-interval", "1ms"}, "rlserver: --snapshot-interval must be at least 10ms\n"},
	} {
		_, errOut, code := runBinary(t, nil, tc.args...)
		if code != 1 || errOut != tc.want {
			t.Errorf("rlserver %q: status %d, stderr %q; want 1, %q", tc.args, code, errOut, tc.want)
		}
	}
}
