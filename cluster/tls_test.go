package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// testPKI is a throwaway CA and one certificate it signed, usable as both
// server and client (every node presents the same kind of certificate).
type testPKI struct {
	pool *x509.CertPool
	cert tls.Certificate
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return testPKI{pool: pool, cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}
}

// configs are the listener's and the dialler's sides of mutual TLS, as
// cmd/rlserver builds them: the dialler checks the chain, not a name.
func (p testPKI) configs() (server, dial *tls.Config) {
	server = &tls.Config{Certificates: []tls.Certificate{p.cert}, ClientCAs: p.pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	dial = &tls.Config{Certificates: []tls.Certificate{p.cert}, MinVersion: tls.VersionTLS13, InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no certificate")
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: p.pool})
			return err
		}}
	return server, dial
}

// TestClusterMutualTLS: Raft and forwarding run over mutual TLS; a
// connection without TLS, or with a certificate from another CA, gets
// nothing.
func TestClusterMutualTLS(t *testing.T) {
	pki := newTestPKI(t)
	srvCfg, dialCfg := pki.configs()
	c := newCluster(t, 3, func(cfg *Config) { cfg.TLS, cfg.DialTLS = srvCfg, dialCfg })
	l := c.leader()
	var f *tnode
	for _, tn := range c.live() {
		if tn != l {
			f = tn
		}
	}
	drain(t, f, "k", 3) // forwarded from a follower to the leader
	if !denied(t, l, "k", 3) {
		t.Fatal("the leader does not see what the follower's forward took")
	}
	c.converged()

	// A plain TCP peer: the TLS listener sees no handshake and closes.
	plain, err := dialProto(l.addr, time.Second, preamble(0, protoForward), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	expectClosed(t, plain)

	// A peer whose certificate another CA signed is refused.
	rogue := newTestPKI(t)
	_, rogueDial := rogue.configs()
	rogueDial.VerifyConnection = nil // it would not trust the leader either; let it try
	rc, err := dialProto(l.addr, time.Second, preamble(0, protoForward), rogueDial)
	if err == nil {
		defer rc.Close()
		expectClosed(t, rc)
	}
	// And a node that does not trust the cluster's CA does not dial it.
	_, strictRogue := rogue.configs()
	if c, err := dialProto(l.addr, time.Second, preamble(0, protoRaft), strictRogue); err == nil {
		c.Close()
		t.Fatal("dialled a peer whose certificate another CA signed")
	}
	if p, err := dialPeer(raft.ServerAddress(l.addr), 0, time.Second, dialCfg); err != nil {
		t.Fatalf("a member's certificate is refused: %v", err)
	} else {
		p.close()
	}
}

func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	_, err := c.Read(b[:])
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open (%v)", err)
	}
}
