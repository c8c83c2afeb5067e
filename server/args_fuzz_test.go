package server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/policy"
	"github.com/rlserver/rlserver/resp"
	"github.com/rlserver/rlserver/standalone"
)

// FuzzCommandArgs sends pipelines of commands with arbitrary arguments
// through a server's real path (guard, reader, command table, argument
// parsing, batching, an in-process engine, the reply writer), on one
// connection served by serveConn over an in-memory net.Conn. Command names
// come from the table (subcommands too) or from the input; arguments are
// arbitrary bytes or picked from a list of interesting values (numbers at
// every boundary, NaN, infinities, keywords of every command). It checks
// that nothing panics, that every command gets exactly one reply (up to
// QUIT) and each reply is a valid RESP2 or RESP3 value, that every error
// reply starts with an upper-case code and a space, and that no error is
// "ERR internal error" (an engine or backend error the wire table does not
// know) or Go's text for a runtime error.
//
// Three servers take turns: no password; a password with a key length
// limit of 8; ACL users, one of them limited to the limiter commands on
// keys k*.
//
// testdata keeps the first crasher it found: a command that is one empty
// argument panicked Server.handle and ended the process.
func FuzzCommandArgs(f *testing.F) {
	for _, s := range argsFuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		argsFuzzOnce.Do(argsFuzzSetup)
		if len(data) == 0 {
			return
		}
		srv := argsFuzzServers[int(data[0])%len(argsFuzzServers)]
		cmds := argsFuzzDecode(data[1:])
		var stream bytes.Buffer
		want := len(cmds)
		for i, args := range cmds {
			stream.WriteString(argsFuzzEncode(args))
			if strings.EqualFold(string(args[0]), "quit") {
				want = i + 1
				break
			}
		}
		out := argsFuzzServe(srv, stream.Bytes())
		r := bufio.NewReader(bytes.NewReader(out))
		for i := range want {
			v, err := argsFuzzReadValue(r, 0)
			if err != nil {
				t.Fatalf("reply %d of %d to %q: %v\nall output: %q", i, want, cmds[:want], err, out)
			}
			if v != "" {
				t.Fatalf("reply %d to %q: %s", i, cmds[i], v)
			}
		}
		if rest, _ := io.ReadAll(r); len(rest) > 0 {
			t.Fatalf("%d replies expected to %q, then %q more", want, cmds[:want], rest)
		}
	})
}

var (
	argsFuzzOnce    sync.Once
	argsFuzzServers []*Server
	argsFuzzNames   []string // the table's top-level command names, sorted
)

func argsFuzzSetup() {
	eng := engine.New(2) // lives as long as the fuzzing process
	policies := policy.NewStore()
	loose := resp.GuardLimits{MaxBulkLen: 1 << 20, MaxArgs: 1024, MaxInlineLen: 64 << 10}
	settings := map[string]string{"maxclients": "10000", "max-key-len": "16384", "port": "6379", "save": ""}
	acl, err := ParseACL([]byte("user default on >pw ~* &* +@all\nuser app on >apppw ~k* +@ratelimit -rl.reset +ping\nuser off off nopass +@all\n"), "")
	if err != nil {
		panic(err)
	}
	for _, cfg := range []Config{
		{Settings: settings},
		{RequirePass: "pw", PreAuthGuard: loose, MaxKeyLen: 8, Settings: settings},
		{ACL: acl, PreAuthGuard: loose, Settings: settings},
	} {
		cfg.Version = "fuzz"
		backend := standalone.New(eng, policies)
		cfg.Policies = backend
		argsFuzzServers = append(argsFuzzServers, New(cfg, backend))
	}
	for _, c := range command.All() {
		if c.Parent == nil {
			argsFuzzNames = append(argsFuzzNames, c.Name)
		}
	}
	slices.Sort(argsFuzzNames)
}

// argsFuzzValues are argument values worth trying everywhere.
var argsFuzzValues = []string{
	"", "0", "1", "-1", "2", "3", "10", "100", "1000", "100000", "100001", "1000000",
	"0.001", "0.1", "1.5", "-0.5", "1e308", "1e309", "-1e309", "1e-308", "4.9e-324", "1e12", "999999999999.9",
	"-0", "+1", "01", " 1", "1 ", "0x10", "1_000", "nan", "NaN", "-nan", "inf", "-inf", "+inf", "Infinity",
	"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
	"18446744073709551616", "1152921504606846975", "1152921504606846976", "9223372036",
	"k", "key", "k1", "kx", "\x00", "\r\n", "\xff", "a b", "*", "max*", "*?*?*?*?!", "[a-",
	"TOKENS", "tokens", "AUTH", "auth", "default", "app", "off", "pw", "apppw", "SETNAME", "setname",
	"schedule", "nosave", "save", "now", "force", "abort", "sync", "async", "type", "normal", "id",
	"lib-name", "lib-ver", "help", "HELP", "rl.allow", "client|list", "get", "all", "everything",
	"server", "memory", "count", "limit", "withscores",
	"SET", "GET", "DEL", "LIST", "LOAD", "COST", "p", "q", "ALLOW", "THROTTLE", "FIXED", "SLIDING", "LOG", "SHAPE",
	strings.Repeat("k", 9), strings.Repeat("k", 17<<10),
}

// argsFuzzDecode turns the input into at most 16 commands. Per command: a
// byte choosing the name (one of the table's, or raw bytes from the
// input), a byte giving the argument count (0-7), then each argument: a
// byte that, with its high bit set, picks from argsFuzzValues, else is the
// length (0-127) of raw bytes that follow. A container's first argument
// is one of its subcommands' names when its byte says so.
func argsFuzzDecode(b []byte) [][][]byte {
	next := func() byte {
		if len(b) == 0 {
			return 0
		}
		c := b[0]
		b = b[1:]
		return c
	}
	arg := func() []byte {
		c := next()
		if c&0x80 != 0 {
			return []byte(argsFuzzValues[int(c&0x7f)%len(argsFuzzValues)])
		}
		n := min(int(c), len(b))
		a := b[:n:n]
		b = b[n:]
		return a
	}
	var cmds [][][]byte
	for len(b) > 0 && len(cmds) < 16 {
		var cmd *command.Cmd
		var args [][]byte
		if i := int(next()); i < len(argsFuzzNames) {
			cmd = command.ByName(argsFuzzNames[i])
			name := cmd.Name
			if i%2 == 1 {
				name = strings.ToUpper(name)
			}
			args = append(args, []byte(name))
		} else {
			args = append(args, arg())
		}
		for j := range int(next() % 8) {
			if j == 0 && cmd != nil && len(cmd.Subcommands) > 0 {
				if k := int(next()); k < 2*len(cmd.Subcommands) {
					sc := cmd.Subcommands[k%len(cmd.Subcommands)]
					args = append(args, []byte(sc.Name[len(cmd.Name)+1:]))
					continue
				}
			}
			args = append(args, arg())
		}
		cmds = append(cmds, args)
	}
	return cmds
}

func argsFuzzEncode(args [][]byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// argsFuzzConn is a client connection in memory: reads come from in, then
// io.EOF; writes are kept.
type argsFuzzConn struct {
	net.Conn
	in  *bytes.Reader
	out bytes.Buffer
}

func (c *argsFuzzConn) Read(p []byte) (int, error)  { return c.in.Read(p) }
func (c *argsFuzzConn) Write(p []byte) (int, error) { return c.out.Write(p) }
func (c *argsFuzzConn) Close() error                { return nil }
func (c *argsFuzzConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 50000}
}
func (c *argsFuzzConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6379}
}
func (c *argsFuzzConn) SetDeadline(time.Time) error      { return nil }
func (c *argsFuzzConn) SetReadDeadline(time.Time) error  { return nil }
func (c *argsFuzzConn) SetWriteDeadline(time.Time) error { return nil }

// argsFuzzServe serves one connection that sends stream and returns what
// the server wrote.
func argsFuzzServe(s *Server, stream []byte) []byte {
	fake := &argsFuzzConn{in: bytes.NewReader(stream)}
	nc := resp.NewGuardConn(fake, s.cfg.Guard)
	c := newConn(nc, 64<<20)
	s.wg.Add(1)
	s.serveConn(c)
	return fake.out.Bytes()
}

// argsFuzzReadValue reads one RESP2/RESP3 reply and returns "" if it is
// well-formed and its errors are well-formed, else what is wrong. A
// malformed stream is an error.
func argsFuzzReadValue(r *bufio.Reader, depth int) (string, error) {
	if depth > 16 {
		return "", errors.New("replies nested deeper than 16")
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("reply line: %v", err)
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return "", fmt.Errorf("malformed reply line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	if strings.ContainsAny(body, "\r\n") {
		return "", fmt.Errorf("CR or LF inside the line %q", line)
	}
	length := func() (int, error) {
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || n > 64<<20 {
			return 0, fmt.Errorf("bad length in %q", line)
		}
		return n, nil
	}
	switch kind {
	case '+':
		return "", nil
	case '-':
		code, _, ok := strings.Cut(body, " ")
		if !ok || code == "" || strings.Trim(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
			return fmt.Sprintf("error reply %q does not start with an upper-case code and a space", body), nil
		}
		// Client bytes are echoed in some errors (unknown command, unknown
		// subcommand), so only whole texts are recognized here.
		if body == "ERR internal error" || strings.HasPrefix(body, "ERR runtime error") {
			return fmt.Sprintf("error reply %q leaks an internal error", body), nil
		}
		return "", nil
	case ':':
		if _, err := strconv.ParseInt(body, 10, 64); err != nil {
			return "", fmt.Errorf("bad integer %q", line)
		}
		return "", nil
	case '_':
		if body != "" {
			return "", fmt.Errorf("bad null %q", line)
		}
		return "", nil
	case '#':
		if body != "t" && body != "f" {
			return "", fmt.Errorf("bad boolean %q", line)
		}
		return "", nil
	case ',':
		if _, err := strconv.ParseFloat(body, 64); err != nil && body != "inf" && body != "-inf" && body != "nan" {
			return "", fmt.Errorf("bad double %q", line)
		}
		return "", nil
	case '$', '=', '!':
		n, err := length()
		if err != nil || n == -1 && kind == '$' {
			return "", err
		}
		if n < 0 {
			return "", fmt.Errorf("negative length in %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", fmt.Errorf("bulk body: %v", err)
		}
		if string(buf[n:]) != "\r\n" {
			return "", fmt.Errorf("bulk of %d bytes not followed by CRLF", n)
		}
		if kind == '=' && (n < 4 || buf[3] != ':') {
			return "", fmt.Errorf("bad verbatim string %q", buf)
		}
		return "", nil
	case '*', '%', '~', '>':
		n, err := length()
		if err != nil || n == -1 && kind == '*' {
			return "", err
		}
		if n < 0 {
			return "", fmt.Errorf("negative length in %q", line)
		}
		if kind == '%' {
			n *= 2
		}
		for range n {
			if bad, err := argsFuzzReadValue(r, depth+1); bad != "" || err != nil {
				return bad, err
			}
		}
		return "", nil
	}
	return "", fmt.Errorf("unknown reply type in %q", line)
}

// argsFuzzSeeds: a few commands of every kind, encoded for argsFuzzDecode.
func argsFuzzSeeds() [][]byte {
	argsFuzzOnce.Do(argsFuzzSetup)
	idx := func(name string) byte {
		i, ok := slices.BinarySearch(argsFuzzNames, name)
		if !ok {
			panic("no command " + name)
		}
		return byte(i)
	}
	arg := func(v string) []byte {
		if i := slices.Index(argsFuzzValues, v); i >= 0 && i <= 0x7f {
			return []byte{0x80 | byte(i)}
		}
		if len(v) > 0x7f {
			panic("seed argument too long")
		}
		return append([]byte{byte(len(v))}, v...)
	}
	cmd := func(name string, args ...string) []byte {
		b := []byte{idx(name), byte(len(args))}
		for i, a := range args {
			if c := command.ByName(name); i == 0 && len(c.Subcommands) > 0 {
				k := slices.IndexFunc(c.Subcommands, func(sc *command.Cmd) bool { return sc.Name == name+"|"+a })
				if k < 0 {
					k = 0xff // not a subcommand: a raw argument follows
				}
				b = append(b, byte(k))
				if k != 0xff {
					continue
				}
			}
			b = append(b, arg(a)...)
		}
		return b
	}
	var seeds [][]byte
	add := func(server byte, cmds ...[]byte) {
		seeds = append(seeds, append([]byte{server}, slices.Concat(cmds...)...))
	}
	add(0, cmd("rl.allow", "k", "10", "1"), cmd("rl.peek", "k", "10", "1", "0"), cmd("rl.allow", "k", "nan", "1"),
		cmd("rl.allow", "k", "10", "inf"), cmd("rl.allow", "k", "9223372036854775808", "1"), cmd("rl.allow", "k", "10", "1e-308", "5"))
	add(0, cmd("cl.throttle", "k", "10", "100", "1"), cmd("cl.throttle", "kx", "-1", "0", "9223372036854775807", "1"),
		cmd("gcra", "k", "10", "1", "1e12", "TOKENS", "3"), cmd("gcra", "kx", "0", "1", "0.001", "tokens"))
	add(0, cmd("rl.fixed", "k1", "10", "1000"), cmd("rl.sliding", "k1", "10", "1000", "2"), cmd("rl.log", "kx", "100001", "1000"),
		cmd("rl.log", "kx", "100000", "1152921504606846976", "1"), cmd("rl.shape", "kx", "10", "0.1", "3"), cmd("type", "kx"), cmd("pttl", "kx"))
	add(0, cmd("rl.policy", "set", "p", "ALLOW", "10", "1"), cmd("rl.policy", "set", "q", "shape", "3", "0.1"),
		cmd("rl.check", "p", "k", "q", "k1"), cmd("rl.check", "COST", "0", "p", "k"), cmd("rl.check", "p", "k", "p", "k"),
		cmd("rl.check", "p", "kx", "x", "k"), cmd("rl.policy", "del", "p"), cmd("rl.check", "p", "k"), cmd("rl.policy", "list"))
	add(0, cmd("del", "k", "k1", "kx"), cmd("exists", "k"), cmd("ttl", "k"), cmd("unlink", "\x00"), cmd("rl.reset", "k"),
		cmd("dbsize"), cmd("flushall", "async"), cmd("ping", "a b"), cmd("echo", "\r\n"))
	add(0, cmd("hello", "3"), cmd("client", "list", "id", "1"), cmd("client", "info"), cmd("info", "everything"),
		cmd("config", "get", "max*"), cmd("command", "docs", "rl.allow"), cmd("command", "getkeys", "rl.allow", "k", "1", "1"), cmd("role"), cmd("time"))
	add(0, cmd("client", "setname", "a b"), cmd("client", "setinfo", "lib-name", "\r\n"), cmd("select", "1"), cmd("shutdown", "abort"),
		cmd("bgsave", "schedule"), cmd("save"), cmd("lastsave"), cmd("acl", "whoami"), cmd("acl", "list"), cmd("quit"), cmd("ping"))
	add(1, cmd("rl.allow", "k", "10", "1"), cmd("auth", "wrong"), cmd("auth", "pw"), cmd("rl.allow", strings.Repeat("k", 9), "10", "1"),
		cmd("hello", "2", "AUTH", "default", "pw"), cmd("reset"), cmd("ping"))
	add(2, cmd("auth", "app", "apppw"), cmd("rl.allow", "k", "10", "1"), cmd("rl.allow", "key", "10", "1"), cmd("rl.reset", "k"),
		cmd("flushall"), cmd("acl", "whoami"), cmd("auth", "off", "x"), cmd("acl", "cat", "ratelimit"))
	add(0, []byte{255, 4, 'n', 'o', 'p', 'e', 2, 0x80, 0x81}, cmd("config", "get", "*?*?*?*?!"), cmd("client", "nope"))
	return seeds
}
