package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// JoinVia asks a member, at its RESP address, to add this node
// (RL.CLUSTER JOIN id raft-addr), retrying every half second until it
// succeeds or ctx ends. A node whose directory already holds Raft state is
// a member already and needs no join.
func (n *Node) JoinVia(ctx context.Context, memberRESP, password string) error {
	for {
		err := joinOnce(ctx, memberRESP, password, n.cfg.NodeID, n.cfg.RaftAdvertise)
		if err == nil {
			n.log.Info("joined the cluster", "via", memberRESP)
			return nil
		}
		n.log.Warn("join failed; retrying", "via", memberRESP, "err", err)
		t := time.NewTimer(500 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-n.closing:
			t.Stop()
			return ErrShutdown
		case <-t.C:
		}
	}
}

// joinOnce sends the join over one RESP connection (AUTH first when a
// password is set) and reads the reply.
func joinOnce(ctx context.Context, addr, password, id, raftAddr string) error {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	send := func(args ...string) error {
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := c.Write([]byte(b.String())); err != nil {
			return err
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if strings.HasPrefix(line, "-") {
			return errors.New(strings.TrimSpace(line[1:]))
		}
		return nil
	}
	if password != "" {
		if err := send("AUTH", password); err != nil {
			return err
		}
	}
	return send("RL.CLUSTER", "JOIN", id, raftAddr)
}
