package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/engine"
)

// Cluster mode flags: set --node-id to run as a Raft member.
type clusterOptions struct {
	nodeID            string
	raftAddr          string
	raftAdvertise     string
	advertise         string
	bootstrap         bool
	join              string
	peers             string
	heartbeatTimeout  time.Duration
	electionTimeout   time.Duration
	commitTimeout     time.Duration
	snapshotThreshold uint64
}

func addClusterFlags(fs *flag.FlagSet, c *clusterOptions) {
	fs.StringVar(&c.nodeID, "node-id", "", "cluster mode: this node's unique, stable id (empty: standalone)")
	fs.StringVar(&c.raftAddr, "raft-addr", "127.0.0.1:7000", "cluster mode: listen address for Raft and forwarding between nodes")
	fs.StringVar(&c.raftAdvertise, "raft-advertise", "", "cluster mode: Raft address other nodes dial (default: --raft-addr)")
	fs.StringVar(&c.advertise, "advertise", "", "cluster mode: client (RESP) address shown to other nodes and clients (default: --addr)")
	fs.BoolVar(&c.bootstrap, "bootstrap", false, "cluster mode: start a new one-node cluster (first node only, first start only)")
	fs.StringVar(&c.join, "join", "", "cluster mode: join the cluster through this member's client address (host:port)")
	fs.StringVar(&c.peers, "peers", "", "cluster mode: fixed cluster of id=raft-host:port,... (the same list on every node, first start only)")
	fs.DurationVar(&c.heartbeatTimeout, "heartbeat-timeout", 400*time.Millisecond, "cluster mode: time without a leader's contact before a follower starts an election")
	fs.DurationVar(&c.electionTimeout, "election-timeout", 400*time.Millisecond, "cluster mode: time a candidate waits for an election's result")
	fs.DurationVar(&c.commitTimeout, "commit-timeout", 2*time.Second, "cluster mode: longest wait for a command to be committed and applied")
	fs.Uint64Var(&c.snapshotThreshold, "snapshot-threshold", 8192, "cluster mode: log entries between Raft snapshots")
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
	if c.peers != "" {
		if _, err := cluster.ParsePeers(c.peers); err != nil {
			return fmt.Errorf("invalid value for --peers: %v", err)
		}
	}
	if c.heartbeatTimeout < 10*time.Millisecond || c.electionTimeout < 10*time.Millisecond || c.commitTimeout < 10*time.Millisecond {
		return fmt.Errorf("--heartbeat-timeout, --election-timeout and --commit-timeout must be at least 10ms")
	}
	return nil
}

// openCluster starts the Raft node over eng, with its state in dir/raft,
// and starts joining in the background when asked to.
func openCluster(ctx context.Context, c clusterOptions, eng *engine.Engine, dir string, respAddr net.Addr, password, logLevel string, logJSON bool, sec security, log *slog.Logger) (*cluster.Node, error) {
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
	raftLevel := "warn"
	if strings.EqualFold(logLevel, "debug") {
		raftLevel = "debug"
	}
	n, err := cluster.Open(cluster.Config{
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
		Logger:            log,
		RaftLogLevel:      raftLevel,
		RaftLogJSON:       logJSON,
		TLS:               sec.clusterServer,
		DialTLS:           sec.clusterDial,
	}, eng)
	if err != nil {
		return nil, err
	}
	if c.join != "" && !n.HasState() {
		go n.JoinVia(ctx, c.join, password)
	}
	return n, nil
}
