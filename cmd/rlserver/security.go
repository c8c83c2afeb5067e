package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/rlserver/rlserver/acl"
	"github.com/rlserver/rlserver/server"
)

// securityOptions are the ACL and TLS flags (Redis's names where Redis
// has one). --requirepass stays in main.go.
type securityOptions struct {
	aclFile        string
	tlsCertFile    string
	tlsKeyFile     string
	tlsCAFile      string
	tlsAuthClients string // "yes", "no", "optional"; "": yes with a CA, else no
	tlsAddr        string
	tlsCluster     bool
}

func addSecurityFlags(fs *flag.FlagSet, o *securityOptions) {
	fs.StringVar(&o.aclFile, "aclfile", "", "file of ACL users, one per line in Redis's syntax (user <name> on >password ~* +@ratelimit ...); read at start")
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", "", "TLS: the server's certificate (PEM); with --tls-key-file, clients must use TLS")
	fs.StringVar(&o.tlsKeyFile, "tls-key-file", "", "TLS: the private key of --tls-cert-file (PEM)")
	fs.StringVar(&o.tlsCAFile, "tls-ca-cert-file", "", "TLS: CA certificates (PEM) that sign client certificates (and, with --tls-cluster, the nodes')")
	fs.StringVar(&o.tlsAuthClients, "tls-auth-clients", "", "TLS: client certificates: yes (required), optional (verified when sent) or no (default: yes with --tls-ca-cert-file, else no)")
	fs.StringVar(&o.tlsAddr, "tls-addr", "", "TLS: serve TLS on this address and plain TCP on --addr (empty: --addr itself serves TLS only)")
	fs.BoolVar(&o.tlsCluster, "tls-cluster", false, "TLS: mutual TLS between cluster nodes (Raft and forwarding), with the same certificate and CA")
}

func (o securityOptions) tlsOn() bool { return o.tlsCertFile != "" }

func (o securityOptions) check() error {
	if (o.tlsCertFile == "") != (o.tlsKeyFile == "") {
		return fmt.Errorf("--tls-cert-file and --tls-key-file go together")
	}
	if !o.tlsOn() {
		switch {
		case o.tlsCAFile != "":
			return fmt.Errorf("--tls-ca-cert-file needs --tls-cert-file and --tls-key-file")
		case o.tlsAuthClients != "":
			return fmt.Errorf("--tls-auth-clients needs --tls-cert-file and --tls-key-file")
		case o.tlsAddr != "":
			return fmt.Errorf("--tls-addr needs --tls-cert-file and --tls-key-file")
		case o.tlsCluster:
			return fmt.Errorf("--tls-cluster needs --tls-cert-file, --tls-key-file and --tls-ca-cert-file")
		}
		return nil
	}
	switch o.tlsAuthClients {
	case "", "no":
	case "yes", "optional":
		if o.tlsCAFile == "" {
			return fmt.Errorf("--tls-auth-clients %s needs --tls-ca-cert-file (the CA that signs client certificates)", o.tlsAuthClients)
		}
	default:
		return fmt.Errorf("invalid value %q for --tls-auth-clients: use yes, no or optional", o.tlsAuthClients)
	}
	if o.tlsCluster && o.tlsCAFile == "" {
		return fmt.Errorf("--tls-cluster needs --tls-ca-cert-file (the CA that signs the nodes' certificates)")
	}
	return nil
}

// security is what the flags load at start: the users, and the TLS
// configurations for clients and for the cluster transport (nil: plain).
type security struct {
	acl           *acl.ACL
	clientTLS     *tls.Config
	clusterServer *tls.Config
	clusterDial   *tls.Config
}

// load reads the ACL file and the certificates. Errors name the file and
// the problem in one line.
func (o securityOptions) load(requirePass string) (security, error) {
	var sec security
	if o.aclFile != "" {
		src, err := os.ReadFile(o.aclFile)
		if err != nil {
			return sec, fmt.Errorf("aclfile: %v", err)
		}
		if sec.acl, err = server.ParseACL(src, requirePass); err != nil {
			return sec, fmt.Errorf("aclfile %s: %v", o.aclFile, err)
		}
	}
	if !o.tlsOn() {
		return sec, nil
	}
	cert, err := tls.LoadX509KeyPair(o.tlsCertFile, o.tlsKeyFile)
	if err != nil {
		return sec, fmt.Errorf("TLS certificate %s and key %s: %v", o.tlsCertFile, o.tlsKeyFile, err)
	}
	var pool *x509.CertPool
	if o.tlsCAFile != "" {
		pem, err := os.ReadFile(o.tlsCAFile)
		if err != nil {
			return sec, fmt.Errorf("--tls-ca-cert-file: %v", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return sec, fmt.Errorf("--tls-ca-cert-file %s: no PEM certificate in it", o.tlsCAFile)
		}
	}
	sec.clientTLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, ClientCAs: pool}
	switch o.authClients() {
	case "optional":
		sec.clientTLS.ClientAuth = tls.VerifyClientCertIfGiven
	case "yes":
		sec.clientTLS.ClientAuth = tls.RequireAndVerifyClientCert
	}
	if o.tlsCluster {
		sec.clusterServer = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13,
			ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
		sec.clusterDial = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13,
			// Peers are dialled by their Raft address, which certificates
			// rarely name: like Redis's cluster bus, a node accepts any
			// peer whose certificate the CA signed, and checks no name.
			InsecureSkipVerify: true, VerifyConnection: verifyChain(pool)}
	}
	return sec, nil
}

// verifyChain checks the peer's certificate against roots, for a client
// config whose InsecureSkipVerify turned off the usual check (and its host
// name check with it).
func verifyChain(roots *x509.CertPool) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("peer sent no certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		return err
	}
}

// listen returns the client listeners: ln (plain TCP on --addr) becomes
// TLS-only when TLS is on without --tls-addr; with --tls-addr, a second
// listener serves TLS there.
func (o securityOptions) listen(sec security, ln net.Listener) ([]net.Listener, error) {
	if sec.clientTLS == nil {
		return []net.Listener{ln}, nil
	}
	if o.tlsAddr == "" {
		return []net.Listener{tls.NewListener(ln, sec.clientTLS)}, nil
	}
	tln, err := net.Listen("tcp", o.tlsAddr)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			err = op.Err
		}
		return nil, fmt.Errorf("cannot listen on %s (--tls-addr): %v", o.tlsAddr, err)
	}
	return []net.Listener{ln, tls.NewListener(tln, sec.clientTLS)}, nil
}

// apply puts the users into the edge's configuration, and the settings
// into CONFIG GET's answers.
func (o securityOptions) apply(sec security, cfg *server.Config) {
	cfg.ACL = sec.acl
	auth := ""
	if o.tlsOn() {
		auth = o.authClients()
	}
	cluster := "no"
	if o.tlsCluster {
		cluster = "yes"
	}
	for k, v := range map[string]string{
		"aclfile":          o.aclFile,
		"tls-cert-file":    o.tlsCertFile,
		"tls-key-file":     o.tlsKeyFile,
		"tls-ca-cert-file": o.tlsCAFile,
		"tls-auth-clients": auth,
		"tls-addr":         o.tlsAddr,
		"tls-cluster":      cluster,
	} {
		cfg.Settings[k] = v
	}
}

// logListeners says where TLS is served, after the start line.
func (o securityOptions) logListeners(log *slog.Logger, lns []net.Listener) {
	if !o.tlsOn() {
		return
	}
	if len(lns) > 1 {
		log.Info("serving TLS", "tls_addr", lns[1].Addr().String(), "plain_addr", lns[0].Addr().String(),
			"client_certificates", o.authClients(), "cluster_tls", o.tlsCluster)
		return
	}
	log.Info("serving TLS only", "addr", lns[0].Addr().String(), "client_certificates", o.authClients(), "cluster_tls", o.tlsCluster)
}

// authClients is --tls-auth-clients with its default filled in.
func (o securityOptions) authClients() string {
	switch {
	case o.tlsAuthClients != "":
		return o.tlsAuthClients
	case o.tlsCAFile != "":
		return "yes"
	}
	return "no"
}
