package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// JoinOptions say how a joining node reaches the member it asks: the
// member's client (RESP) address and what that address demands, exactly as
// a client of that member would present it.
type JoinOptions struct {
	Addr     string      // the member's client address, host:port
	User     string      // ACL user to AUTH as; "": the default user
	Password string      // "": send no AUTH
	TLS      *tls.Config // nil: plain TCP; else its client certificate, if any, is presented
}

// Errors of a join that retrying cannot fix: the member refused what this
// node presented. JoinVia keeps retrying other errors (member unreachable,
// no leader yet) quickly.
var (
	// ErrJoinCredentials: the member refused the user and password
	// (WRONGPASS), or wants them and got none (NOAUTH).
	ErrJoinCredentials = errors.New("the member refused the credentials")
	// ErrJoinForbidden: the member accepted the credentials but refused the
	// join: the user may not run RL.CLUSTER JOIN (NOPERM), protected mode
	// (DENIED), or the member is not in cluster mode.
	ErrJoinForbidden = errors.New("the member refused the join")
	// ErrJoinTLS: TLS on one side and not the other, a member certificate
	// this node does not trust, or a client certificate the member refused
	// (or needed and did not get).
	ErrJoinTLS = errors.New("tls with the member failed")
)

// JoinRefused reports whether err is one of the errors above, which only a
// change of configuration fixes.
func JoinRefused(err error) bool {
	return errors.Is(err, ErrJoinCredentials) || errors.Is(err, ErrJoinForbidden) || errors.Is(err, ErrJoinTLS)
}

// JoinVia asks a member, at its client address, to add this node
// (RL.CLUSTER JOIN id raft-addr), retrying until it succeeds or ctx ends:
// every half second while the member cannot be reached or has no leader,
// every refusedRetry when it refused what this node presented (its
// configuration may still change). A node whose directory already holds
// Raft state is a member already and needs no join.
func (n *Node) JoinVia(ctx context.Context, o JoinOptions) error {
	for {
		err := n.JoinOnce(ctx, o)
		if err == nil {
			return nil
		}
		pause := 500 * time.Millisecond
		if JoinRefused(err) {
			pause = refusedRetry
			n.log.Error("join refused; retrying", "via", o.Addr, "err", err, "retry_in", pause)
		} else {
			n.log.Warn("join failed; retrying", "via", o.Addr, "err", err)
		}
		t := time.NewTimer(pause)
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

const refusedRetry = 5 * time.Second

// JoinOnce makes one attempt at what JoinVia repeats. Errors for which
// JoinRefused is true name what the member refused.
func (n *Node) JoinOnce(ctx context.Context, o JoinOptions) error {
	err := joinOnce(ctx, o, n.cfg.NodeID, n.cfg.RaftAdvertise)
	if err == nil {
		n.log.Info("joined the cluster", "via", o.Addr)
	}
	return err
}

// joinOnce sends the join over one client connection: PING first, so a
// TLS-only member (or protected mode) is found out before a password is
// sent, then AUTH when a password is set, then the join.
func joinOnce(ctx context.Context, o JoinOptions, id, raftAddr string) error {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := d.DialContext(dctx, "tcp", o.Addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if o.TLS != nil {
		tc := tls.Client(c, o.TLS)
		if err := tc.HandshakeContext(dctx); err != nil {
			return tlsJoinErr(err)
		}
		c = tc
	}
	r := bufio.NewReader(c)
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
		return "", nil
	}
	refusal, err := send("PING")
	if err != nil {
		return err
	}
	switch {
	case strings.Contains(refusal, "accepts TLS connections only"):
		return fmt.Errorf("%w: the member serves TLS only on %s and this node connected without TLS", ErrJoinTLS, o.Addr)
	case strings.HasPrefix(refusal, "DENIED"):
		return fmt.Errorf("%w: %s", ErrJoinForbidden, refusal)
	}
	if o.Password != "" {
		args := []string{"AUTH", o.Password}
		if o.User != "" {
			args = []string{"AUTH", o.User, o.Password}
		}
		refusal, err := send(args...)
		switch {
		case err != nil:
			return err
		case strings.HasPrefix(refusal, "ERR AUTH <password> called without any password configured"):
			// The member needs no password: the join goes on without one.
		case refusal != "":
			return fmt.Errorf("%w (user %q): %s", ErrJoinCredentials, userName(o.User), refusal)
		}
	}
	refusal, err = send("RL.CLUSTER", "JOIN", id, raftAddr)
	switch {
	case err != nil:
		return err
	case refusal == "":
		return nil
	case strings.HasPrefix(refusal, "NOAUTH"):
		return fmt.Errorf("%w: the member requires a password and none was given: %s", ErrJoinCredentials, refusal)
	case strings.HasPrefix(refusal, "NOPERM"), strings.HasPrefix(refusal, "DENIED"):
		return fmt.Errorf("%w (user %q): %s", ErrJoinForbidden, userName(o.User), refusal)
	case strings.Contains(refusal, "cluster support disabled"):
		return fmt.Errorf("%w: the member is not in cluster mode: %s", ErrJoinForbidden, refusal)
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
		return fmt.Errorf("%w: the member does not speak TLS on this address (%v)", ErrJoinTLS, err)
	case errors.As(err, &verify), errors.As(err, &unk), errors.As(err, &host), errors.As(err, &inv):
		return fmt.Errorf("%w: the member's certificate is not trusted: %v", ErrJoinTLS, err)
	case errors.As(err, &op) && op.Op == "remote error": // a TLS alert from the member
		return fmt.Errorf("%w: the member refused this node's TLS connection (client certificate missing or not signed by a CA it trusts?): %v", ErrJoinTLS, err)
	}
	return err
}
