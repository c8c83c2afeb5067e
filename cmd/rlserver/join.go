package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/resp"
)

// --join: a new node asks a member, over the member's client (RESP)
// address, to add it (RL.CLUSTER JOIN id raft-addr). The member's refusals
// are told apart by the error codes and texts command/errors.go exports, so
// a change of wording there changes this client with it.

// joinTarget says how a joining node reaches the member it asks: the
// member's client address and what that address demands, exactly as a
// client of that member would present it.
type joinTarget struct {
	Addr     string      // the member's client address, host:port
	User     string      // ACL user to AUTH as; "": the default user
	Password string      // "": send no AUTH
	TLS      *tls.Config // nil: plain TCP; else its client certificate, if any, is presented
	Sharded  bool        // this node runs with --groups: the member must too
}

// Errors of a join that retrying cannot fix: the member refused what this
// node presented. joinVia keeps retrying other errors (member unreachable,
// no leader yet) quickly.
var (
	// errJoinCredentials: the member refused the user and password
	// (WRONGPASS), or wants them and got none (NOAUTH).
	errJoinCredentials = errors.New("the member refused the credentials")
	// errJoinForbidden: the member accepted the credentials but refused the
	// join: the user may not run RL.CLUSTER JOIN (NOPERM), protected mode
	// (DENIED), or the member is not in cluster mode.
	errJoinForbidden = errors.New("the member refused the join")
	// errJoinTLS: TLS on one side and not the other, a member certificate
	// this node does not trust, or a client certificate the member refused
	// (or needed and did not get).
	errJoinTLS = errors.New("tls with the member failed")
	// errJoinMode: one node is sharded (--groups), the other is not.
	errJoinMode = errors.New("the member's cluster is of another kind")
)

// joinRefused reports whether err is one of the errors above, which only a
// change of configuration fixes.
func joinRefused(err error) bool {
	return errors.Is(err, errJoinCredentials) || errors.Is(err, errJoinForbidden) || errors.Is(err, errJoinTLS) || errors.Is(err, errJoinMode)
}

// joinVia asks the member at t to add n, retrying until it succeeds, ctx
// ends or n closes: every half second while the member cannot be reached
// or has no leader, every refusedRetry when it refused what this node
// presented (its configuration may still change). A node whose directory
// already holds Raft state is a member already and needs no join.
func joinVia(ctx context.Context, n joiner, id string, t joinTarget, log *slog.Logger) error {
	for {
		err := joinOnce(ctx, n, id, t, log)
		if err == nil {
			return nil
		}
		pause := 500 * time.Millisecond
		if joinRefused(err) {
			pause = refusedRetry
			log.Error("join refused; retrying", "via", t.Addr, "err", err, "retry_in", pause)
		} else {
			log.Warn("join failed; retrying", "via", t.Addr, "err", err)
		}
		tm := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		case <-n.Done():
			tm.Stop()
			return cluster.ErrShutdown
		case <-tm.C:
		}
	}
}

const refusedRetry = 5 * time.Second

// joinOnce makes one attempt at what joinVia repeats, for node id at n's
// advertised Raft address. Errors for which joinRefused is true name what
// the member refused.
func joinOnce(ctx context.Context, n joiner, id string, t joinTarget, log *slog.Logger) error {
	err := join(ctx, t, id, n.RaftAddr())
	if err == nil {
		log.Info("joined the cluster", "via", t.Addr)
	}
	return err
}

// join sends the join over one client connection: PING first, so a
// TLS-only member (or protected mode) is found out before a password is
// sent, then AUTH when a password is set, then the join.
func join(ctx context.Context, t joinTarget, id, raftAddr string) error {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := d.DialContext(dctx, "tcp", t.Addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if t.TLS != nil {
		tc := tls.Client(c, t.TLS)
		if err := tc.HandshakeContext(dctx); err != nil {
			return tlsJoinErr(err)
		}
		c = tc
	}
	r := bufio.NewReader(c)
	// send returns the member's error reply, "" for any other reply.
	send := func(args ...string) (string, error) {
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := c.Write([]byte(b.String())); err != nil {
			return "", tlsJoinErr(err)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return "", tlsJoinErr(err)
		}
		if strings.HasPrefix(line, "-") {
			return strings.TrimSpace(line[1:]), nil
		}
		// A bulk string (CLUSTER MYID's id) has its payload on the next
		// line: read it, so the next reply starts where it should.
		if n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$"))); strings.HasPrefix(line, "$") && err == nil && n >= 0 {
			if _, err := io.ReadFull(r, make([]byte, n+2)); err != nil {
				return "", tlsJoinErr(err)
			}
		}
		return "", nil
	}
	refusal, err := send("PING")
	if err != nil {
		return err
	}
	switch {
	case refusal == resp.TextNotTLS:
		return fmt.Errorf("%w: the member serves TLS only on %s and this node connected without TLS", errJoinTLS, t.Addr)
	case command.ErrorCode(refusal) == command.ErrCodeDenied:
		return fmt.Errorf("%w: %s", errJoinForbidden, refusal)
	}
	if t.Password != "" {
		args := []string{"AUTH", t.Password}
		if t.User != "" {
			args = []string{"AUTH", t.User, t.Password}
		}
		refusal, err := send(args...)
		switch {
		case err != nil:
			return err
		case refusal == command.ErrTextNoPassSet:
			// The member needs no password: the join goes on without one.
		case refusal != "":
			return fmt.Errorf("%w (user %q): %s", errJoinCredentials, userName(t.User), refusal)
		}
	}
	// A sharded member (--groups) answers CLUSTER MYID; one Raft group
	// answers that cluster support is disabled. The two cannot mix: a
	// node of the other kind would take the meta group for its only
	// group and never open the data groups.
	refusal, err = send("CLUSTER", "MYID")
	if err != nil {
		return err
	}
	switch memberSharded := refusal == ""; {
	case memberSharded && !t.Sharded:
		return fmt.Errorf("%w: the cluster is sharded (--groups): start this node with --groups too", errJoinMode)
	case !memberSharded && t.Sharded && command.ErrorCode(refusal) == "ERR":
		return fmt.Errorf("%w: the cluster is one Raft group: start this node without --groups", errJoinMode)
	}
	refusal, err = send("RL.CLUSTER", "JOIN", id, raftAddr)
	if err != nil {
		return err
	}
	if refusal == "" {
		return nil
	}
	switch command.ErrorCode(refusal) {
	case command.ErrCodeNoAuth:
		return fmt.Errorf("%w: the member requires a password and none was given: %s", errJoinCredentials, refusal)
	case command.ErrCodeNoPerm, command.ErrCodeDenied:
		return fmt.Errorf("%w (user %q): %s", errJoinForbidden, userName(t.User), refusal)
	}
	if refusal == command.ErrTextNoCluster {
		return fmt.Errorf("%w: the member is not in cluster mode: %s", errJoinForbidden, refusal)
	}
	return errors.New(refusal)
}

func userName(u string) string {
	if u == "" {
		return "default"
	}
	return u
}

// tlsJoinErr marks the TLS failures that retrying cannot fix: a member
// certificate this node does not trust, a member that does not speak TLS,
// or an alert from the member (it refused this node's certificate or
// wanted one). With TLS 1.3 the member's refusal of a client certificate
// arrives on the first read after the handshake, so reads and writes go
// through here too.
func tlsJoinErr(err error) error {
	var (
		verify *tls.CertificateVerificationError
		op     *net.OpError
		hdr    tls.RecordHeaderError
		unk    x509.UnknownAuthorityError
		host   x509.HostnameError
		inv    x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &hdr):
		return fmt.Errorf("%w: the member does not speak TLS on this address (%v)", errJoinTLS, err)
	case errors.As(err, &verify), errors.As(err, &unk), errors.As(err, &host), errors.As(err, &inv):
		return fmt.Errorf("%w: the member's certificate is not trusted: %v", errJoinTLS, err)
	case errors.As(err, &op) && op.Op == "remote error": // a TLS alert from the member
		return fmt.Errorf("%w: the member refused this node's TLS connection (client certificate missing or not signed by a CA it trusts?): %v", errJoinTLS, err)
	}
	return err
}
