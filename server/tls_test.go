package server

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/resp"
	"github.com/rlserver/rlserver/standalone"
)

// selfSigned is a throwaway certificate for 127.0.0.1 and the pool that
// trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rlserver test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

// TestServeTLSAndPlain: one server on a plain and a TLS listener; a
// plain-text client on the TLS port gets an error line and a close; a
// stalled handshake is cut off at PartialTimeout; Shutdown ends both.
func TestServeTLSAndPlain(t *testing.T) {
	cert, pool := selfSigned(t)
	eng := engine.New(2)
	defer eng.Close()
	srv := New(Config{Version: "test", PartialTimeout: 300 * time.Millisecond}, standalone.New(eng, nil))
	plainLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tlsLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() { done <- srv.Serve(plainLn) }()
	go func() { done <- srv.Serve(tls.NewListener(tlsLn, &tls.Config{Certificates: []tls.Certificate{cert}})) }()

	tc, err := tls.Dial("tcp", tlsLn.Addr().String(), &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(tc)
	io.WriteString(tc, encode("RL.ALLOW", "k", "2", "0.001")+encode("CLIENT", "INFO"))
	if got := readReply(t, r); got != "[:1 :1 :0 :1000000]" {
		t.Fatalf("RL.ALLOW over TLS = %q", got)
	}
	readReply(t, r)

	c, pr := dial(t, plainLn.Addr().String())
	io.WriteString(c, encode("RL.ALLOW", "k", "2", "0.001"))
	if got := readReply(t, pr); !strings.HasPrefix(got, "[:1 :0 :0 :") { // reset_after_ms counts down
		t.Fatalf("RL.ALLOW over plain TCP = %q (state not shared?)", got)
	}

	raw, rr := dial(t, tlsLn.Addr().String())
	io.WriteString(raw, encode("PING"))
	if got := readReply(t, rr); got != "-"+resp.TextNotTLS {
		t.Fatalf("plain text on the TLS port = %q", got)
	}
	if _, err := rr.ReadByte(); err == nil {
		t.Fatal("connection still open after the error line")
	}

	stall, sr := dial(t, tlsLn.Addr().String())
	stall.Write([]byte{0x16, 0x03, 0x01}) // the start of a record, then nothing
	start := time.Now()
	if _, err := sr.ReadByte(); err == nil {
		t.Fatal("a stalled handshake got a reply")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("stalled handshake cut after %v, want about PartialTimeout", d)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("Serve after Shutdown: %v", err)
		}
	}
	if _, err := tls.Dial("tcp", tlsLn.Addr().String(), &tls.Config{RootCAs: pool}); err == nil {
		t.Fatal("the TLS listener still accepts after Shutdown")
	}
}
