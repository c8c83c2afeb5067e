package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/groups"
)

// Cluster mode flags: set --node-id to run as a Raft member.
type clusterOptions struct {
	nodeID            string
	raftAddr          string
	raftAdvertise     string
	advertise         string
	bootstrap         bool
	join              string
	joinUser          string
	joinPassword      string
	joinTLS           bool
	peers             string
	heartbeatTimeout  time.Duration
	electionTimeout   time.Duration
	commitTimeout     time.Duration
	snapshotThreshold uint64
	snapshotInterval  time.Duration
	diskStallTimeout  time.Duration
	groups            int
	replicas          int
	nodeDeadAfter     time.Duration
	redirect          string
}

// exitDiskFault is the exit status of a leader whose Raft log write stalled
// for longer than --raft-disk-stall-timeout, or whose sync of log entries
// it had appended without one failed (docs/cluster.md).
const exitDiskFault = 3

func addClusterFlags(fs *flag.FlagSet, c *clusterOptions) {
	fs.StringVar(&c.nodeID, "node-id", "", "cluster mode: this node's unique, stable id (empty: standalone)")
	fs.StringVar(&c.raftAddr, "raft-addr", "127.0.0.1:7000", "cluster mode: listen address for Raft and forwarding between nodes")
	fs.StringVar(&c.raftAdvertise, "raft-advertise", "", "cluster mode: Raft address other nodes dial (default: --raft-addr)")
	fs.StringVar(&c.advertise, "advertise", "", "cluster mode: client (RESP) address shown to other nodes and clients (default: --addr)")
	fs.BoolVar(&c.bootstrap, "bootstrap", false, "cluster mode: start a new one-node cluster (first node only, first start only)")
	fs.StringVar(&c.join, "join", "", "cluster mode: join the cluster through this member's client address (host:port)")
	fs.StringVar(&c.joinUser, "join-user", "", "cluster mode: ACL user --join authenticates as with the member (default: the default user)")
	fs.StringVar(&c.joinPassword, "join-password", "", "cluster mode: password --join gives the member (default: --requirepass); better set as RL_JOIN_PASSWORD or in --config")
	fs.BoolVar(&c.joinTLS, "join-tls", false, "cluster mode: --join connects with TLS, presenting --tls-cert-file and trusting --tls-ca-cert-file (or the system's CAs)")
	fs.StringVar(&c.peers, "peers", "", "cluster mode: fixed cluster of id=raft-host:port,... (the same list on every node, first start only)")
	fs.DurationVar(&c.heartbeatTimeout, "heartbeat-timeout", 400*time.Millisecond, "cluster mode: time without a leader's contact before a follower starts an election")
	fs.DurationVar(&c.electionTimeout, "election-timeout", 400*time.Millisecond, "cluster mode: time a candidate waits for an election's result")
	fs.DurationVar(&c.commitTimeout, "commit-timeout", 2*time.Second, "cluster mode: longest wait for a command to be committed and applied")
	fs.Uint64Var(&c.snapshotThreshold, "snapshot-threshold", 8192, "cluster mode: log entries between Raft snapshots")
	fs.DurationVar(&c.snapshotInterval, "snapshot-interval", 30*time.Second, "cluster mode: how often Raft checks --snapshot-threshold (each check waits this to twice this)")
	fs.IntVar(&c.groups, "groups", 0, "cluster mode: shard the keyspace over this many Raft groups behind the Redis Cluster protocol (first start only; 0: one Raft group, no hash slots)")
	fs.IntVar(&c.replicas, "replicas", 3, "cluster mode with --groups: voters per Raft group, placed over the nodes, and voters of the meta group (first start only; a cluster of fewer nodes has every group on every node)")
	fs.DurationVar(&c.nodeDeadAfter, "node-dead-after", 5*time.Minute, "cluster mode with --groups and --replicas: a node unreachable this long is taken for dead and its replicas are rebuilt on the other nodes")
	fs.StringVar(&c.redirect, "cluster-redirect", "moved", "cluster mode with --groups: for a key whose group this node does not lead, answer -MOVED (moved, for Redis Cluster clients) or forward it to that group's leader (forward, for other clients)")
	fs.DurationVar(&c.diskStallTimeout, "raft-disk-stall-timeout", time.Second, "cluster mode: a leader whose Raft log write has not finished within this exits with status 3, so that another node leads (0: never)")
}

func (c *clusterOptions) check() error {
	if c.nodeID == "" {
		return nil
	}
	modes := 0
	for _, set := range []bool{c.bootstrap, c.join != "", c.peers != ""} {
		if set {
			modes++
		}
	}
	if modes > 1 {
		return fmt.Errorf("--bootstrap, --join and --peers are exclusive")
	}
	if c.join == "" && (c.joinUser != "" || c.joinPassword != "" || c.joinTLS) {
		return fmt.Errorf("--join-user, --join-password and --join-tls need --join")
	}
	if c.joinUser != "" && c.joinPassword == "" {
		return fmt.Errorf("--join-user needs --join-password")
	}
	if c.snapshotInterval < 10*time.Millisecond {
		return fmt.Errorf("--snapshot-interval must be at least 10ms")
	}
	if c.peers != "" {
		if _, err := cluster.ParsePeers(c.peers); err != nil {
			return fmt.Errorf("invalid value for --peers: %v", err)
		}
	}
	if c.groups < 0 || c.groups > 1024 {
		return fmt.Errorf("--groups must be between 0 and 1024")
	}
	if c.nodeDeadAfter < time.Second {
		return fmt.Errorf("--node-dead-after must be at least 1s")
	}
	if c.replicas < 1 || c.replicas > 7 {
		return fmt.Errorf("--replicas must be between 1 and 7")
	}
	if _, err := groups.ParseRedirect(c.redirect); err != nil {
		return fmt.Errorf("invalid value for --cluster-redirect: %v", err)
	}
	if c.diskStallTimeout != 0 && c.diskStallTimeout < 10*time.Millisecond {
		return fmt.Errorf("--raft-disk-stall-timeout must be 0 (off) or at least 10ms")
	}
	if c.heartbeatTimeout < 10*time.Millisecond || c.electionTimeout < 10*time.Millisecond || c.commitTimeout < 10*time.Millisecond {
		return fmt.Errorf("--heartbeat-timeout, --election-timeout and --commit-timeout must be at least 10ms")
	}
	return nil
}

// openCluster starts the Raft node over eng, with its state in dir/raft,
// and starts joining in the background when asked to.
func openCluster(ctx context.Context, c clusterOptions, eng *engine.Engine, dir string, respAddr net.Addr, password string, sec security, log *slog.Logger) (*cluster.Node, error) {
	n, err := cluster.Open(nodeConfig(c, dir, respAddr, sec, log), eng)
	if err != nil {
		return nil, err
	}
	watchLogRole(n.IsLeader)
	return n, startJoin(ctx, c, n, password, sec, log)
}

// openHost starts a sharded node (--groups): the meta group and a replica
// of every data group, in dir/raft/meta and dir/raft/gN.
func openHost(ctx context.Context, c clusterOptions, shards int, dir string, respAddr net.Addr, password string, sec security, log *slog.Logger) (*groups.Host, error) {
	redirect, _ := groups.ParseRedirect(c.redirect)
	h, err := groups.Open(groups.Config{
		Node:          nodeConfig(c, dir, respAddr, sec, log),
		Groups:        c.groups,
		Shards:        shards,
		Redirect:      redirect,
		Replicas:      c.replicas,
		NodeDeadAfter: c.nodeDeadAfter,
	})
	if err != nil {
		return nil, err
	}
	watchLogRole(func() bool {
		for _, n := range append(h.Groups(), h.Meta()) {
			if n.IsLeader() {
				return true
			}
		}
		return false
	})
	return h, startJoin(ctx, c, h, password, sec, log)
}

func nodeConfig(c clusterOptions, dir string, respAddr net.Addr, sec security, log *slog.Logger) cluster.Config {
	peers, _ := cluster.ParsePeers(c.peers)
	adv := c.advertise
	if adv == "" {
		adv = respAddr.String()
		if host, port, err := net.SplitHostPort(adv); err == nil && net.ParseIP(host).IsUnspecified() {
			if h, err := os.Hostname(); err == nil {
				adv = net.JoinHostPort(h, port)
			}
		}
	}
	return cluster.Config{
		NodeID:            c.nodeID,
		RaftAddr:          c.raftAddr,
		RaftAdvertise:     c.raftAdvertise,
		RESPAddr:          adv,
		Dir:               filepath.Join(dir, "raft"),
		Bootstrap:         c.bootstrap,
		Peers:             peers,
		HeartbeatTimeout:  c.heartbeatTimeout,
		ElectionTimeout:   c.electionTimeout,
		CommitTimeout:     c.commitTimeout,
		SnapshotThreshold: c.snapshotThreshold,
		SnapshotInterval:  c.snapshotInterval,
		DiskStallTimeout:  c.diskStallTimeout,
		// A stalled write: the Raft loop is blocked in it and its
		// heartbeats go on from other goroutines; a failed sync: what is
		// on disk is unknown. Only ending the process clears either.
		OnDiskFatal: func(err error) {
			log.Error(err.Error()+"; exiting so that another node leads", "exit_status", exitDiskFault)
			os.Exit(exitDiskFault)
		},
		Logger:   log,
		TLS:      sec.clusterServer,
		DialTLS:  sec.clusterDial,
		LogHooks: logCrashHooks(),
	}
}

// startJoin starts joining through --join when asked to and the node is
// not a member yet. One attempt runs before serving, so that credentials
// or TLS settings the member refuses stop the start with one clear line
// (the node is closed then); a member that is not reachable yet is
// retried in the background (join.go).
func startJoin(ctx context.Context, c clusterOptions, n joiner, password string, sec security, log *slog.Logger) error {
	if c.join == "" || n.HasState() {
		return nil
	}
	jt := joinOptions(c, password, sec)
	err := joinOnce(ctx, n, c.nodeID, jt, log)
	if joinRefused(err) {
		n.Close()
		return fmt.Errorf("cannot join the cluster through %s: %v%s", c.join, err, joinHint(err))
	}
	if err != nil {
		log.Warn("join failed; retrying in the background", "via", c.join, "err", err)
		go joinVia(ctx, n, c.nodeID, jt, log)
	}
	return nil
}

// joiner is the node --join adds: a cluster.Node or a groups.Host.
type joiner interface {
	RaftAddr() string
	HasState() bool
	Done() <-chan struct{}
	Close() error
}

// joinOptions is what --join presents to the member: --join-user and
// --join-password (default: --requirepass), and with --join-tls this
// node's certificate. With --tls-cluster the member's certificate is
// checked as a cluster peer's (signed by the CA, any name), otherwise as
// redis-cli --tls would (signed by --tls-ca-cert-file or a system CA, for
// the host named in --join).
func joinOptions(c clusterOptions, requirePass string, sec security) joinTarget {
	jo := joinTarget{Addr: c.join, User: c.joinUser, Password: c.joinPassword, Sharded: c.groups > 0}
	if jo.Password == "" {
		jo.Password = requirePass
	}
	if !c.joinTLS {
		return jo
	}
	switch {
	case sec.clusterDial != nil:
		jo.TLS = sec.clusterDial.Clone()
	case sec.clientTLS != nil:
		host, _, _ := net.SplitHostPort(c.join)
		jo.TLS = &tls.Config{Certificates: sec.clientTLS.Certificates, RootCAs: sec.clientTLS.ClientCAs,
			ServerName: host, MinVersion: tls.VersionTLS12}
	default:
		host, _, _ := net.SplitHostPort(c.join)
		jo.TLS = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	return jo
}

// joinHint names the flags behind a refused join.
func joinHint(err error) string {
	switch {
	case errors.Is(err, errJoinCredentials):
		return " (check --join-user and --join-password; the password defaults to --requirepass)"
	case errors.Is(err, errJoinForbidden):
		return " (the member must be in cluster mode and let the --join user run RL.CLUSTER JOIN: +@all, +@dangerous or +rl.cluster|join)"
	case errors.Is(err, errJoinTLS):
		return " (check --join-tls, --tls-cert-file, --tls-key-file and --tls-ca-cert-file)"
	}
	return ""
}
