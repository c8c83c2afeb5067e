package clienttest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Authentication with ACL users (--aclfile) and TLS for clients and for
// the cluster transport, end to end: real processes, go-redis and
// redis-cli. Certificates are made per test by a throwaway CA.

// pki is a throwaway CA and the certificates it signed, as PEM files.
type pki struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caFile string
	pool   *x509.CertPool
	serial int64
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.caKey = key
	p.caFile = filepath.Join(p.dir, "ca.crt")
	writePEM(t, p.caFile, "CERTIFICATE", der)
	p.pool = x509.NewCertPool()
	p.pool.AddCert(p.ca)
	p.serial = 1
	return p
}

// issue makes a certificate and key signed by the CA, for 127.0.0.1 and
// localhost, usable by a server and a client (nodes of a cluster are
// both), and returns the two files.
func (p *pki) issue(t *testing.T, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// clientTLS is a go-redis TLS configuration trusting p's CA, presenting
// the certificate in certFile/keyFile when given. It sends that
// certificate whichever CAs the server asks for (Go's client would send
// none when its CA is not among them; OpenSSL's sends it).
func (p *pki) clientTLS(t *testing.T, certFile, keyFile string) *tls.Config {
	t.Helper()
	cfg := &tls.Config{RootCAs: p.pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	return cfg
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func hashOf(pw string) string {
	h := sha256.Sum256([]byte(pw))
	return hex.EncodeToString(h[:])
}

// securityACL is the ACL file of these tests: an application that may
// call the limiter commands and nothing that administers the server, an
// operator with everything, and a default user that needs a password.
const securityACL = `# rlserver users
user default on >admin-pw ~* &* +@all
user app on >app-pw ~* +@ratelimit +@connection -@dangerous
user ops on >ops-pw ~* &* +@all
user tenant on >tenant-pw ~tenant1:* +@ratelimit +@connection -@dangerous
user retired off >old-pw ~* +@all
`

// TestACLApplicationUser: the application user runs the limiter commands
// and gets Redis's NOPERM for FLUSHALL, SHUTDOWN, CONFIG and cluster
// membership, which change nothing; go-redis, redis-cli and raw RESP.
func TestACLApplicationUser(t *testing.T) {
	t.Parallel()
	acl := writeFile(t, "users.acl", securityACL)
	s := start(t, opts{args: []string{"--aclfile", acl}, authPass: "admin-pw"})
	ctx := context.Background()

	// go-redis sends HELLO 3 AUTH app app-pw.
	app := newGoRedis(t, s, &redis.Options{Username: "app", Password: "app-pw"})
	wantDecision(t, app, allowedAt(5, 1), "RL.ALLOW", "acl", 5, slowRate)
	wantDecision(t, app, allowedAt(5, 2), "RL.ALLOW", "acl", 5, slowRate)
	for _, tc := range []struct {
		args []any
		cmd  string
	}{
		{[]any{"FLUSHALL"}, "flushall"},
		{[]any{"FLUSHDB"}, "flushdb"},
		{[]any{"SHUTDOWN", "NOSAVE"}, "shutdown"},
		{[]any{"CONFIG", "GET", "*"}, "config|get"},
		{[]any{"RL.CLUSTER", "JOIN", "n9", "127.0.0.1:1"}, "rl.cluster|join"},
		{[]any{"RL.CLUSTER", "REMOVE", "n1"}, "rl.cluster|remove"},
		{[]any{"SAVE"}, "save"},
		{[]any{"BGSAVE"}, "bgsave"},
		{[]any{"CLIENT", "LIST"}, "client|list"},
		{[]any{"ACL", "LIST"}, "acl|list"},
		{[]any{"INFO"}, "info"},
	} {
		wantErr(t, app, "NOPERM User app has no permissions to run the '"+tc.cmd+"' command", tc.args...)
	}
	// Nothing above took effect: the bucket and the server are still there.
	wantDecision(t, app, allowedAt(5, 3), "RL.PEEK", "acl", 5, slowRate)
	wantReply(t, app, "PONG", "PING")
	info, err := app.ClientInfo(ctx).Result()
	if err != nil || info.Resp != 3 {
		t.Errorf("CLIENT INFO as app = %+v, %v", info, err)
	}

	ops := newGoRedis(t, s, &redis.Options{Username: "ops", Password: "ops-pw"})
	wantReply(t, ops, "ops", "ACL", "WHOAMI")
	wantReply(t, ops, []any{"app", "default", "ops", "retired", "tenant"}, "ACL", "USERS")
	wantReply(t, ops, []any{
		"user app on #" + hashOf("app-pw") + " ~* resetchannels -@all +@ratelimit +@connection -@dangerous",
		"user default on #" + hashOf("admin-pw") + " ~* &* +@all",
		"user ops on #" + hashOf("ops-pw") + " ~* &* +@all",
		"user retired off #" + hashOf("old-pw") + " ~* resetchannels +@all",
		"user tenant on #" + hashOf("tenant-pw") + " ~tenant1:* resetchannels -@all +@ratelimit +@connection -@dangerous",
	}, "ACL", "LIST")
	cat, err := ops.Do(ctx, "ACL", "CAT", "ratelimit").StringSlice()
	for _, want := range []string{"rl.allow", "rl.peek", "rl.reset", "cl.throttle", "gcra", "rl.fixed", "rl.sliding", "rl.log", "rl.shape"} {
		if err != nil || !slices.Contains(cat, want) {
			t.Errorf("ACL CAT ratelimit = %q, %v: no %s", cat, err, want)
		}
	}
	if got := ops.ConfigGet(ctx, "aclfile").Val(); got["aclfile"] != acl {
		t.Errorf("CONFIG GET aclfile = %v, want %s", got, acl)
	}
	if list, err := ops.ClientList(ctx).Result(); err != nil || !strings.Contains(list, " user=app ") {
		t.Errorf("CLIENT LIST does not show the app user: %q, %v", list, err)
	}

	// Keys outside the tenant's pattern are refused.
	tenant := newGoRedis(t, s, &redis.Options{Username: "tenant", Password: "tenant-pw"})
	wantDecision(t, tenant, allowedAt(5, 1), "RL.ALLOW", "tenant1:a", 5, slowRate)
	wantErr(t, tenant, "NOPERM No permissions to access a key", "RL.ALLOW", "tenant2:a", 5, slowRate)

	// Wrong or disabled users: WRONGPASS, counted.
	for _, o := range []*redis.Options{
		{Username: "app", Password: "nope"},
		{Username: "retired", Password: "old-pw"},
		{Username: "nobody", Password: "x"},
	} {
		o.MaxRetries = -1
		c := newGoRedis(t, s, o)
		if err := c.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Errorf("%s: PING = %v, want WRONGPASS", o.Username, err)
		}
	}
	admin := newGoRedis(t, s, &redis.Options{Password: "admin-pw"}) // AUTH <password>: the default user
	wantReply(t, admin, "default", "ACL", "WHOAMI")
	if got := infoField(t, admin, "stats", "acl_access_denied_cmd"); got != "11" {
		t.Errorf("acl_access_denied_cmd = %s, want 11", got)
	}
	if got := infoField(t, admin, "stats", "acl_access_denied_key"); got != "1" {
		t.Errorf("acl_access_denied_key = %s, want 1", got)
	}
	// go-redis tries twice: HELLO 3 AUTH, then AUTH and HELLO 2.
	if got := infoField(t, admin, "stats", "acl_access_denied_auth"); got != "6" {
		t.Errorf("acl_access_denied_auth = %s, want 6", got)
	}

	// Raw RESP: AUTH user pass, HELLO 3 AUTH, and a pipeline mixing
	// allowed and refused commands keeps its order.
	rc := s.raw(t)
	rc.do("PING\r\n", "-NOAUTH Authentication required.\r\n")
	rc.do("AUTH app app-pw\r\n", "+OK\r\n")
	rc.send("RL.ALLOW raw 2 0.001\r\nFLUSHALL\r\nRL.ALLOW raw 2 0.001\r\nRL.ALLOW raw 2 0.001\r\n")
	for i, want := range []string{"*[:1 :1 :0 :", "-NOPERM User app has no permissions to run the 'flushall' command", "*[:1 :0 :0 :", "*[:0 :0 :"} {
		if got := rc.read().String(); !strings.HasPrefix(got, want) {
			t.Errorf("pipeline reply %d = %s, want %s...", i, got, want)
		}
	}
	h := s.raw(t)
	h.send("HELLO 3 AUTH app app-pw\r\n")
	if v := h.read(); v.kind != '%' || v.mapOf()["proto"].num != 3 {
		t.Errorf("HELLO 3 AUTH app = %v", v)
	}
	h.do("SHUTDOWN\r\n", "-NOPERM User app has no permissions to run the 'shutdown' command\r\n")

	// redis-cli --user/--pass.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--user", "app", "--pass", "app-pw", "--no-auth-warning", "RL.PEEK", "acl", "5", slowRate}, "1\n2\n0\n"},
		{[]string{"--user", "app", "--pass", "app-pw", "--no-auth-warning", "FLUSHALL"}, "NOPERM User app has no permissions to run the 'flushall' command\n"},
		{[]string{"--user", "app", "--pass", "app-pw", "--no-auth-warning", "CONFIG", "GET", "port"}, "NOPERM User app has no permissions to run the 'config|get' command\n"},
		{[]string{"--user", "ops", "--pass", "ops-pw", "--no-auth-warning", "ACL", "WHOAMI"}, "ops\n"},
	} {
		out, errOut, code := cli(t, s, "", tc.args...)
		if !strings.HasPrefix(out, tc.want) || errOut != "" || code != 0 {
			t.Errorf("redis-cli %q = %q (stderr %q, status %d), want %q", tc.args, out, errOut, code, tc.want)
		}
	}
	// The server is still up and nothing was flushed.
	wantDecision(t, admin, allowedAt(5, 3), "RL.PEEK", "acl", 5, slowRate)
}

// TestACLRequirepassWithFile: --requirepass gives the default user of an
// ACL file that has none its password; the file's other users work.
func TestACLRequirepassWithFile(t *testing.T) {
	t.Parallel()
	acl := writeFile(t, "users.acl", "user app on >app-pw ~* +@ratelimit\n")
	s := start(t, opts{args: []string{"--aclfile", acl, "--requirepass", "pw"}, authPass: "pw"})
	c := newGoRedis(t, s, &redis.Options{Password: "pw"})
	wantReply(t, c, "default", "ACL", "WHOAMI")
	app := newGoRedis(t, s, &redis.Options{Username: "app", Password: "app-pw"})
	wantDecision(t, app, allowedAt(5, 1), "RL.ALLOW", "k", 5, slowRate)
	rc := s.raw(t)
	rc.do("PING\r\n", "-NOAUTH Authentication required.\r\n")
}

// TestACLFileErrors: a bad file, or a clash with other flags, stops the
// start with one line naming the file, the line and the problem.
func TestACLFileErrors(t *testing.T) {
	t.Parallel()
	free := "127.0.0.1:" + strconv.Itoa(freePort(t))
	bad := writeFile(t, "bad.acl", "user app on >pw ~* +@ratelimit\n\nuser ops on >pw +@all -flushal\n")
	withDefault := writeFile(t, "default.acl", "# x\nuser default on >pw +@all ~*\n")
	missing := filepath.Join(t.TempDir(), "missing.acl")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--aclfile", bad}, "rlserver: aclfile " + bad + ": line 3: user 'ops': '-flushal': unknown command 'flushal'\n"},
		{[]string{"--aclfile", withDefault, "--requirepass", "x"}, "rlserver: aclfile " + withDefault +
			": line 2: the file defines the default user, whose password requirepass would also set: give it its password in the file (user default on >password ...)\n"},
		{[]string{"--aclfile", missing}, "rlserver: aclfile: open " + missing + ": no such file or directory\n"},
		{[]string{"--tls-cert-file", "x"}, "rlserver: --tls-cert-file and --tls-key-file go together\n"},
		{[]string{"--tls-ca-cert-file", "x"}, "rlserver: --tls-ca-cert-file needs --tls-cert-file and --tls-key-file\n"},
		{[]string{"--tls-cert-file", "x", "--tls-key-file", "y", "--tls-auth-clients", "yes"},
			"rlserver: --tls-auth-clients yes needs --tls-ca-cert-file (the CA that signs client certificates)\n"},
		{[]string{"--tls-cert-file", "x", "--tls-key-file", "y", "--tls-auth-clients", "maybe"},
			"rlserver: invalid value \"maybe\" for --tls-auth-clients: use yes, no or optional\n"},
		{[]string{"--tls-cert-file", "x", "--tls-key-file", "y", "--tls-cluster"},
			"rlserver: --tls-cluster needs --tls-ca-cert-file (the CA that signs the nodes' certificates)\n"},
		{[]string{"--tls-cert-file", missing, "--tls-key-file", missing},
			"rlserver: TLS certificate " + missing + " and key " + missing + ": open " + missing + ": no such file or directory\n"},
		{[]string{"--tls-cert-file", bad, "--tls-key-file", bad},
			"rlserver: TLS certificate " + bad + " and key " + bad + ": tls: failed to find any PEM data in certificate input\n"},
	} {
		args := append([]string{"--dir", t.TempDir(), "--addr", free}, tc.args...)
		out, errOut, code := runBinary(t, nil, args...)
		if errOut != tc.want || code == 0 || out != "" {
			t.Errorf("rlserver %q: stderr %q, status %d; want %q", tc.args, errOut, code, tc.want)
		}
	}
}

// startTLS starts rlserver with TLS on a second listener (the harness
// checks readiness on the plain one) and returns it with the TLS address.
func startTLS(t *testing.T, p *pki, authPass string, extra ...string) (*server, string) {
	t.Helper()
	cert, key := p.issue(t, "server")
	tlsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	args := append([]string{"--tls-cert-file", cert, "--tls-key-file", key, "--tls-addr", tlsAddr}, extra...)
	return start(t, opts{args: args, authPass: authPass}), tlsAddr
}

func tlsGoRedis(t *testing.T, addr string, cfg *tls.Config, o *redis.Options) *redis.Client {
	t.Helper()
	if o == nil {
		o = &redis.Options{}
	}
	o.Addr, o.TLSConfig = addr, cfg
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// cliTLS runs redis-cli against addr with args (TLS flags among them).
func cliTLS(t *testing.T, addr string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "redis-cli", append([]string{"-h", host, "-p", port}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("redis-cli %q: timed out", args)
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("redis-cli %q: %v", args, err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// TestTLSClientCertificates: with a CA the server requires client
// certificates (as Redis's tls-auth-clients yes); go-redis and redis-cli
// with one work, without one or with another CA's they are refused, and a
// plain-text client on the TLS port gets an error line and a close.
func TestTLSClientCertificates(t *testing.T) {
	t.Parallel()
	p := newPKI(t, "rlserver test CA")
	acl := writeFile(t, "users.acl", securityACL)
	s, tlsAddr := startTLS(t, p, "admin-pw", "--tls-ca-cert-file", p.caFile, "--aclfile", acl)
	ctx := context.Background()
	cert, key := p.issue(t, "client")

	// go-redis with a client certificate, and ACL users over TLS.
	app := tlsGoRedis(t, tlsAddr, p.clientTLS(t, cert, key), &redis.Options{Username: "app", Password: "app-pw"})
	wantDecision(t, app, allowedAt(3, 1), "RL.ALLOW", "tls", 3, slowRate)
	wantErr(t, app, "NOPERM User app has no permissions to run the 'flushall' command", "FLUSHALL")
	ops := tlsGoRedis(t, tlsAddr, p.clientTLS(t, cert, key), &redis.Options{Username: "ops", Password: "ops-pw"})
	if list, err := ops.ClientList(ctx).Result(); err != nil || !strings.Contains(list, "laddr="+tlsAddr) {
		t.Errorf("CLIENT LIST shows no connection on the TLS address: %q, %v", list, err)
	}
	if got := ops.ConfigGet(ctx, "tls-auth-clients").Val(); got["tls-auth-clients"] != "yes" {
		t.Errorf("CONFIG GET tls-auth-clients = %v, want yes", got)
	}

	// Without a client certificate: the handshake fails.
	noCert := tlsGoRedis(t, tlsAddr, p.clientTLS(t, "", ""), &redis.Options{Username: "app", Password: "app-pw", MaxRetries: -1})
	err := noCert.Ping(ctx).Err()
	var rerr redis.Error
	if err == nil || errors.As(err, &rerr) || !strings.Contains(err.Error(), "tls") {
		t.Errorf("PING without a client certificate: %v, want a TLS error", err)
	}
	// A certificate from another CA.
	other := newPKI(t, "another CA")
	oc, ok := other.issue(t, "stranger")
	stranger := tlsGoRedis(t, tlsAddr, p.clientTLS(t, oc, ok), &redis.Options{Username: "app", Password: "app-pw", MaxRetries: -1})
	if err := stranger.Ping(ctx).Err(); err == nil || errors.As(err, &rerr) {
		t.Errorf("PING with another CA's certificate: %v, want a TLS error", err)
	}
	// A client that does not trust the server's CA refuses it.
	distrust := tlsGoRedis(t, tlsAddr, other.clientTLS(t, cert, key), &redis.Options{MaxRetries: -1})
	if err := distrust.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("PING to a server signed by an unknown CA: %v, want a certificate error", err)
	}

	// Plain text on the TLS port: one error line, then the close.
	c, err := net.DialTimeout("tcp", tlsAddr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc := &rawConn{t: t, c: c, r: bufio.NewReader(c)}
	rc.do("*1\r\n$4\r\nPING\r\n", "-ERR Protocol error: this port accepts TLS connections only\r\n")
	rc.expectEOF()
	// A TLS client that never completes its handshake is cut off at the
	// partial-command deadline; no need to wait for it here, but the
	// plain port still serves meanwhile.
	stall, err := net.DialTimeout("tcp", tlsAddr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer stall.Close()
	stall.Write([]byte{0x16, 0x03, 0x01}) // the start of a ClientHello record
	plain := newGoRedis(t, s, &redis.Options{Password: "admin-pw"})
	wantReply(t, plain, "PONG", "PING")
	wantDecision(t, plain, allowedAt(3, 2), "RL.PEEK", "tls", 3, slowRate)

	// redis-cli --tls with and without a certificate, and without --tls.
	base := []string{"--tls", "--cacert", p.caFile, "--user", "app", "--pass", "app-pw", "--no-auth-warning"}
	out, errOut, code := cliTLS(t, tlsAddr, append(base, "--cert", cert, "--key", key, "RL.ALLOW", "tls", "3", slowRate)...)
	if !strings.HasPrefix(out, "1\n1\n0\n") || errOut != "" || code != 0 {
		t.Errorf("redis-cli --tls --cert: %q (stderr %q, status %d)", out, errOut, code)
	}
	out, errOut, code = cliTLS(t, tlsAddr, append(base, "--cert", cert, "--key", key, "FLUSHALL")...)
	if out != "NOPERM User app has no permissions to run the 'flushall' command\n\n" || code != 0 {
		t.Errorf("redis-cli --tls FLUSHALL as app: %q (stderr %q, status %d)", out, errOut, code)
	}
	out, errOut, code = cliTLS(t, tlsAddr, append(base, "PING")...)
	if out == "PONG\n" || code == 0 && errOut == "" {
		t.Errorf("redis-cli --tls without a certificate: %q (stderr %q, status %d), want a failure", out, errOut, code)
	}
	t.Logf("redis-cli --tls without a certificate: stdout %q, stderr %q, status %d", out, errOut, code)
	out, errOut, code = cliTLS(t, tlsAddr, "PING")
	if !strings.Contains(out+errOut, "this port accepts TLS connections only") {
		t.Errorf("redis-cli without --tls on the TLS port: %q (stderr %q, status %d)", out, errOut, code)
	}
}

// TestTLSOptionalClientCertificates: --tls-auth-clients optional accepts
// clients without a certificate and verifies those that send one.
func TestTLSOptionalClientCertificates(t *testing.T) {
	t.Parallel()
	p := newPKI(t, "rlserver test CA")
	_, tlsAddr := startTLS(t, p, "", "--tls-ca-cert-file", p.caFile, "--tls-auth-clients", "optional")
	ctx := context.Background()
	anon := tlsGoRedis(t, tlsAddr, p.clientTLS(t, "", ""), nil)
	wantDecision(t, anon, allowedAt(2, 1), "RL.ALLOW", "opt", 2, slowRate)
	cert, key := p.issue(t, "client")
	withCert := tlsGoRedis(t, tlsAddr, p.clientTLS(t, cert, key), nil)
	wantDecision(t, withCert, allowedAt(2, 2), "RL.ALLOW", "opt", 2, slowRate)
	other := newPKI(t, "another CA")
	oc, ok := other.issue(t, "stranger")
	stranger := tlsGoRedis(t, tlsAddr, p.clientTLS(t, oc, ok), &redis.Options{MaxRetries: -1})
	var rerr redis.Error
	if err := stranger.Ping(ctx).Err(); err == nil || errors.As(err, &rerr) {
		t.Errorf("PING with another CA's certificate: %v, want a TLS error", err)
	}
	// redis-cli --tls without a certificate.
	out, errOut, code := cliTLS(t, tlsAddr, "--tls", "--cacert", p.caFile, "RL.PEEK", "opt", "2", slowRate)
	if !strings.HasPrefix(out, "0\n0\n") || code != 0 {
		t.Errorf("redis-cli --tls: %q (stderr %q, status %d)", out, errOut, code)
	}
}

// TestTLSOnly: with a certificate and no --tls-addr, --addr serves TLS
// only (no CA: no client certificates), with --requirepass.
func TestTLSOnly(t *testing.T) {
	t.Parallel()
	p := newPKI(t, "rlserver test CA")
	cert, key := p.issue(t, "server")
	s := startNoProbe(t, []string{"--tls-cert-file", cert, "--tls-key-file", key, "--requirepass", "pw"})
	addr := s.addr
	c := tlsGoRedis(t, addr, p.clientTLS(t, "", ""), &redis.Options{Password: "pw", MaxRetries: -1})
	ctx := context.Background()
	if !pollFor(readyTimeout, func() bool { return c.Ping(ctx).Err() == nil }) {
		t.Fatalf("no PONG over TLS within %v: %v", readyTimeout, c.Ping(ctx).Err())
	}
	wantDecision(t, c, allowedAt(2, 1), "RL.ALLOW", "only", 2, slowRate)
	if got := c.ConfigGet(ctx, "tls-auth-clients").Val(); got["tls-auth-clients"] != "no" {
		t.Errorf("CONFIG GET tls-auth-clients = %v, want no", got)
	}
	// No plain text anywhere.
	raw, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rc := &rawConn{t: t, c: raw, r: bufio.NewReader(raw)}
	rc.do("PING\r\n", "-ERR Protocol error: this port accepts TLS connections only\r\n")
	rc.expectEOF()
	// SIGTERM still ends it cleanly (checked at cleanup).
	s.cmd.Process.Signal(syscall.SIGTERM)
	if code, err := s.wait(stopTimeout); err != nil || code != 0 {
		t.Errorf("after SIGTERM: status %d, %v", code, err)
	}
}

// TestClusterTLS: three processes whose Raft and forwarding run over
// mutual TLS (--tls-cluster), clients on plain and TLS listeners.
func TestClusterTLS(t *testing.T) {
	t.Parallel()
	p := newPKI(t, "rlserver cluster CA")
	cert, key := p.issue(t, "node")
	c := startCluster(t, serverBin, "--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", p.caFile,
		"--tls-cluster", "--tls-addr", "127.0.0.1:0")
	leader := c.waitLeader(20 * time.Second)
	// Through a follower: forwarded to the leader over TLS.
	var follower *cnode
	for _, n := range c.live() {
		if n != leader {
			follower = n
		}
	}
	fc := clusterClient(t, follower.respAddr)
	ctx := context.Background()
	for i := range 3 {
		ok, _, err := allowOnce(ctx, fc, "tls-cluster", 3, 1)
		if err != nil || !ok {
			t.Fatalf("allow %d via follower: %v %v", i, ok, err)
		}
	}
	lc := clusterClient(t, leader.respAddr)
	if ok, _, err := allowOnce(ctx, lc, "tls-cluster", 3, 1); err != nil || ok {
		t.Fatalf("4th allow via the leader: %v %v, want denied", ok, err)
	}
	c.converge(20 * time.Second)
	// The Raft port does not talk to a plain-text peer.
	raw, err := net.DialTimeout("tcp", leader.raftAddr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.Write([]byte("F\x00\x00\x00\x00"))
	raw.SetReadDeadline(time.Now().Add(ioTimeout))
	if n, err := io.ReadFull(raw, make([]byte, 1)); err == nil || n > 0 {
		t.Errorf("the Raft port answered a plain-text peer (%d bytes, %v)", n, err)
	}
}

// TestProtectedModeWithACLAndTLS: protected mode looks at the default
// user: on with no password, clients from another address get DENIED
// (over TLS too); off (an ACL file that makes everyone AUTH), they are
// served after AUTH; --protected-mode=false serves them at once. Traffic
// stays on loopback: the server is told (RLSERVER_TEST_REMOTE_IP) to treat
// clients from 127.0.0.2 as another host's.
func TestProtectedModeWithACLAndTLS(t *testing.T) {
	t.Parallel()
	const ip = "127.0.0.2"
	remoteEnv := []string{"RLSERVER_TEST_REMOTE_IP=" + ip}
	p := newPKI(t, "rlserver test CA")
	cert, key := p.issue(t, "server")
	acl := writeFile(t, "users.acl", "user default off\nuser app on >app-pw ~* +@ratelimit +@connection\n")
	for _, tc := range []struct {
		name  string
		args  []string
		auth  string // the harness's AUTH on the plain port
		first string // the reply to PING from the other address
	}{
		{"no password", nil, "", "-DENIED rlserver is running in protected mode because it listens on a non-loopback address and no password is set."},
		{"default user off", []string{"--aclfile", acl}, "", "-NOAUTH Authentication required."},
		{"protected mode off", []string{"--protected-mode=false"}, "", "+PONG"},
	} {
		port := strconv.Itoa(freePort(t))
		args := append([]string{"--tls-cert-file", cert, "--tls-key-file", key, "--tls-addr", "0.0.0.0:" + port}, tc.args...)
		var s *server
		if tc.name == "default user off" {
			// The harness's readiness check cannot AUTH as app: check
			// readiness over TLS below instead of the plain port.
			s = startNoProbe(t, args, remoteEnv...)
		} else {
			s = start(t, opts{args: args, authPass: tc.auth, env: remoteEnv})
		}
		var c *tls.Conn
		if !pollFor(readyTimeout, func() bool {
			var err error
			d := &net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
			c, err = tls.DialWithDialer(d, "tcp", net.JoinHostPort("127.0.0.1", port), p.clientTLS(t, "", ""))
			return err == nil
		}) {
			t.Fatalf("%s: no TLS connection to %s:%s\n%s", tc.name, ip, port, s.stderr)
		}
		defer c.Close()
		rc := &rawConn{t: t, c: c, r: bufio.NewReader(c)}
		rc.send("PING\r\n")
		if got := rc.read().String(); !strings.HasPrefix(got, tc.first) {
			t.Errorf("%s: PING from %s = %s, want %s...", tc.name, ip, got, tc.first)
			continue
		}
		switch tc.name {
		case "no password":
			rc.expectEOF()
		case "default user off":
			rc.do("AUTH app app-pw\r\n", "+OK\r\n")
			rc.do("RL.ALLOW k 1 0.001\r\n", "*4\r\n:1\r\n:0\r\n:0\r\n")
		}
	}
}

// startNoProbe starts rlserver on a loopback --addr without waiting for
// it; the caller polls for readiness its own way.
func startNoProbe(t *testing.T, args []string, env ...string) *server {
	t.Helper()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	s := &server{t: t, addr: addr, dir: t.TempDir(), stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan struct{})}
	s.cmd = exec.Command(binary(), append([]string{"--addr", addr, "--dir", s.dir, "--log-level", "warn"}, args...)...)
	s.cmd.Env = cleanEnv(env...)
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.cmd.Wait()
		s.state = s.cmd.ProcessState
		close(s.exited)
	}()
	t.Cleanup(func() {
		if code, err := s.stop(); err != nil || code != 0 {
			t.Errorf("stopping rlserver: status %d, %v", code, err)
		}
		if t.Failed() {
			t.Logf("rlserver stderr:\n%s", s.stderr)
		}
	})
	return s
}
