package server

import (
	"crypto/tls"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/resp"
)

// client is one connection's state. Its fields are touched only by the
// connection's own goroutine, except the ones under mu, which CLIENT LIST
// reads from other connections.
type client struct {
	id         int64
	addr       string
	laddr      string
	created    time.Time
	rep        replier
	user       *aclUser     // nil until authenticated (set with Server.setUser)
	lower      []byte       // scratch for the lower-cased command name
	lastLookup *command.Cmd // the command last looked up by name

	// The pending batch: engine requests gathered from a pipeline, and the
	// commands whose replies wait for them, in arrival order.
	reqs    []engine.Request
	names   [][]byte // policy names of tiered requests, aligned with reqs (policies.go); may be shorter
	res     []engine.Result
	pending []pendingReply
	scripts []command.EvalCall // the pending batch's scripts (script.go): with no reqs
	outs    []command.Outcome  // their outcomes, by index
	st      connStats          // the pipeline's command tally (stats.go)
	sub     *command.Cmd       // the subcommand a container just ran, for the tally
	memo    command.Memo       // the last limit arguments and what they built
	txn     command.Txn        // MULTI ... EXEC and WATCH
	call    command.Call       // a command answered by command: its reply (table.go)
	wrote   bool               // the pipeline holds a command that may wake a parked client (block.go)

	// CLIENT REPLY (cmdClientReply): replies are dropped while replyOff,
	// or for the one command after CLIENT REPLY SKIP (replySkipNext, then
	// replySkip while it runs). quiet is set while any of them is, so the
	// ordinary path checks one bool per command (Server.processQuiet).
	replyOff, replySkipNext, replySkip, quiet bool

	// Bytes read and written not yet added to the totals under mu (the
	// connection's goroutine adds them once per pipeline, in handle).
	pendingIn, pendingOut int64

	fd int // the socket's descriptor, for CLIENT LIST; -1 when unknown

	mu       sync.Mutex
	userName string // user's name for CLIENT LIST ("default" when none)
	name     string
	libName  string
	libVer   string
	lastCmd  string
	lastAt   time.Time
	resp     int
	noEvict  bool  // CLIENT NO-EVICT on: flag e (rlserver evicts no clients)
	totIn    int64 // tot-net-in, as of the last finished pipeline
	totOut   int64 // tot-net-out, idem
	totCmds  int64 // tot-cmds, idem
}

// pendingReply is a command of the pending batch: its requests are
// reqs[first:first+n]; errText, when set, is its reply instead.
type pendingReply struct {
	cmd     *command.Cmd
	first   int
	n       int
	errText string
	status  string // a simple string reply instead (MULTI's OK, QUEUED)
	script  bool   // an EVAL-family command: its outcome is outs[first]
}

func newClient(id int64, conn *conn, env *command.Env) *client {
	c := &client{id: id, addr: conn.RemoteAddr(), created: time.Now(), resp: 2, userName: "default", fd: -1}
	c.txn.Init()
	c.call.Env, c.call.Txn = env, &c.txn
	if nc := conn.NetConn(); nc != nil {
		c.laddr = nc.LocalAddr().String()
		c.fd = socketFD(nc)
	}
	c.rep.conn = conn
	c.lastAt = c.created
	return c
}

func (c *client) setProto(v int) {
	c.mu.Lock()
	c.resp = v
	c.mu.Unlock()
	c.rep.conn.w.SetRESP3(v == 3)
	c.memo.RESP3 = v == 3
}

// socketFD returns the descriptor under nc (through the guard and TLS),
// or -1. It is read once, at connect.
func socketFD(nc net.Conn) int {
	for {
		switch x := nc.(type) {
		case *resp.GuardConn:
			nc = x.Conn
			continue
		case *tls.Conn:
			nc = x.NetConn()
			continue
		}
		break
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	raw.Control(func(d uintptr) { fd = int(d) })
	return fd
}

// info is the client's line in CLIENT LIST and CLIENT INFO: Redis 7.4's
// fields in its order (networking.c, catClientInfoString), then Redis 8's
// tot-net-in, tot-net-out and tot-cmds. Fields that have no counterpart
// here (pub/sub, MULTI, WATCH, tracking) hold what Redis shows for an idle
// client without them: 0, -1 for multi and redir. The totals are those of
// the pipelines finished before this one.
//
// The buffers belong to the connection's goroutine; their sizes come from
// the snapshots its reader and writer store at each read and each flush
// (resp's Buffered): qbuf is the input buffered and not processed yet (the
// part of a command still arriving, or the pipeline being processed),
// qbuf-free the room after it; obl and omem are the replies being written
// (nonzero while a client does not read them, events is then rw); oll is
// 0, there is no reply list; tot-mem is the read buffer plus the reply
// buffer. argv-mem is the bytes of args, the arguments of the command the
// connection is running, as Redis counts them: given for the client that
// asks (its own CLIENT INFO or CLIENT LIST), nil and 0 for the others.
func (c *client) info(now time.Time, args [][]byte) string {
	qbuf, qfree := c.rep.conn.rd.Buffered()
	out, outCap := c.rep.conn.w.Buffered()
	argvMem := 0
	for _, a := range args {
		argvMem += len(a)
	}
	events := "r"
	if out > 0 {
		events = "rw"
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	flags := "N"
	if c.noEvict {
		flags = "e"
	}
	cmd := c.lastCmd
	if cmd == "" {
		cmd = "NULL"
	}
	var b strings.Builder
	b.Grow(400)
	b.WriteString("id=" + strconv.FormatInt(c.id, 10))
	b.WriteString(" addr=" + c.addr)
	b.WriteString(" laddr=" + c.laddr)
	b.WriteString(" fd=" + strconv.Itoa(c.fd))
	b.WriteString(" name=" + c.name)
	b.WriteString(" age=" + strconv.FormatInt(int64(now.Sub(c.created)/time.Second), 10))
	b.WriteString(" idle=" + strconv.FormatInt(int64(now.Sub(c.lastAt)/time.Second), 10))
	b.WriteString(" flags=" + flags)
	multi, watch := c.txn.Shown()
	b.WriteString(" db=0 sub=0 psub=0 ssub=0 multi=" + strconv.Itoa(multi))
	b.WriteString(" watch=" + strconv.Itoa(watch))
	b.WriteString(" qbuf=" + strconv.Itoa(qbuf))
	b.WriteString(" qbuf-free=" + strconv.Itoa(qfree))
	b.WriteString(" argv-mem=" + strconv.Itoa(argvMem))
	b.WriteString(" multi-mem=0 rbs=0 rbp=0")
	b.WriteString(" obl=" + strconv.Itoa(out))
	b.WriteString(" oll=0")
	b.WriteString(" omem=" + strconv.Itoa(out))
	b.WriteString(" tot-mem=" + strconv.Itoa(qbuf+qfree+outCap))
	b.WriteString(" events=" + events)
	b.WriteString(" cmd=" + cmd)
	b.WriteString(" user=" + c.userName)
	b.WriteString(" redir=-1")
	b.WriteString(" resp=" + strconv.Itoa(c.resp))
	b.WriteString(" lib-name=" + c.libName)
	b.WriteString(" lib-ver=" + c.libVer)
	b.WriteString(" tot-net-in=" + strconv.FormatInt(c.totIn, 10))
	b.WriteString(" tot-net-out=" + strconv.FormatInt(c.totOut, 10))
	b.WriteString(" tot-cmds=" + strconv.FormatInt(c.totCmds, 10))
	return b.String()
}

// age is how long the client has been connected, in whole seconds, as
// CLIENT LIST's age and CLIENT KILL MAXAGE count it.
func (c *client) age(now time.Time) int64 {
	return int64(now.Sub(c.created) / time.Second)
}

// clientTypeMatches reports whether a client of rlserver (every one is a
// normal client: there are no replica, master or pub/sub connections)
// is of the CLIENT LIST / CLIENT KILL TYPE named; ok is false for a name
// Redis does not know.
func clientTypeMatches(name []byte) (match, ok bool) {
	switch strings.ToLower(string(name)) {
	case "normal":
		return true, true
	case "replica", "slave", "master", "pubsub":
		return false, true
	}
	return false, false
}

// cmdClientList: CLIENT LIST [TYPE type | ID id [id ...]], parsed as
// Redis 7 does: TYPE takes exactly one argument; IDs that name no client
// are skipped, in the order given.
func cmdClientList(s *Server, c *client, args [][]byte) outcome {
	var list []*client
	switch {
	case len(args) == 4 && command.EqualFold(args[2], "type"):
		match, ok := clientTypeMatches(args[3])
		if !ok {
			c.rep.error(command.UnknownClientType(args[3]))
			return cmdOK
		}
		if match {
			list = s.clientList()
		}
	case len(args) > 3 && command.EqualFold(args[2], "id"):
		ids := make([]int64, 0, len(args)-3)
		for _, a := range args[3:] {
			id, ok := command.ParseInt(a)
			if !ok {
				c.rep.error(command.ErrInvalidClientID)
				return cmdOK
			}
			ids = append(ids, id)
		}
		s.mu.Lock()
		for _, id := range ids {
			if cl := s.clients[id]; cl != nil {
				list = append(list, cl)
			}
		}
		s.mu.Unlock()
	case len(args) != 2:
		c.rep.error(command.ErrSyntax)
		return cmdOK
	default:
		list = s.clientList()
	}
	var b strings.Builder
	now := time.Now()
	for _, cl := range list {
		var own [][]byte // argv-mem: only this client's command is known
		if cl == c {
			own = args
		}
		b.WriteString(cl.info(now, own))
		b.WriteByte('\n')
	}
	c.rep.verbatim(b.String())
	return cmdOK
}

// clientList returns the connected clients by id.
func (s *Server) clientList() []*client {
	s.mu.Lock()
	list := make([]*client, 0, len(s.clients))
	for _, cl := range s.clients {
		list = append(list, cl)
	}
	s.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].id < list[j].id })
	return list
}

// cmdClientKill: CLIENT KILL addr:port (the old form: +OK, or an error
// when no client has that address; it may name the caller), or CLIENT
// KILL with filters ID, ADDR, LADDR, TYPE, USER, SKIPME yes|no and MAXAGE
// (seconds connected at least), all of which a client must match; the
// reply counts the clients killed. The caller is spared unless SKIPME no.
// Another client's connection is closed at once, even while it waits for
// a command; the caller's own after the reply.
func cmdClientKill(s *Server, c *client, args [][]byte) outcome {
	var (
		addr, laddr, user []byte
		id, maxAge        int64
		typeOK            = true
		skipMe            = true
	)
	if len(args) == 3 {
		addr, skipMe = args[2], false
	} else {
		for i := 2; i < len(args); i += 2 {
			if i+1 >= len(args) {
				c.rep.error(command.ErrSyntax)
				return cmdOK
			}
			v := args[i+1]
			switch {
			case command.EqualFold(args[i], "id"):
				n, ok := command.ParseInt(v)
				if !ok || n < 1 {
					c.rep.error(command.ErrClientIDPositive)
					return cmdOK
				}
				id = n
			case command.EqualFold(args[i], "maxage"):
				n, ok := command.ParseInt(v)
				if !ok {
					c.rep.error(command.ErrMaxAgeNotInteger)
					return cmdOK
				}
				if n <= 0 {
					c.rep.error(command.ErrMaxAgePositive)
					return cmdOK
				}
				maxAge = n
			case command.EqualFold(args[i], "type"):
				match, ok := clientTypeMatches(v)
				if !ok {
					c.rep.error(command.UnknownClientType(v))
					return cmdOK
				}
				typeOK = match
			case command.EqualFold(args[i], "addr"):
				addr = v
			case command.EqualFold(args[i], "laddr"):
				laddr = v
			case command.EqualFold(args[i], "user"):
				if s.acl.users[string(v)] == nil {
					c.rep.error(command.NoSuchUser(v))
					return cmdOK
				}
				user = v
			case command.EqualFold(args[i], "skipme"):
				switch {
				case command.EqualFold(v, "yes"):
					skipMe = true
				case command.EqualFold(v, "no"):
					skipMe = false
				default:
					c.rep.error(command.ErrSyntax)
					return cmdOK
				}
			default:
				c.rep.error(command.ErrSyntax)
				return cmdOK
			}
		}
	}
	now := time.Now()
	killed, self := 0, false
	if typeOK {
		for _, cl := range s.clientList() {
			cl.mu.Lock()
			userName := cl.userName
			cl.mu.Unlock()
			switch {
			case addr != nil && cl.addr != string(addr),
				laddr != nil && cl.laddr != string(laddr),
				id != 0 && cl.id != id,
				user != nil && userName != string(user),
				cl == c && skipMe,
				maxAge != 0 && cl.age(now) < maxAge:
				continue
			}
			if cl == c {
				self = true
			} else {
				s.kill(cl)
			}
			killed++
		}
	}
	if len(args) == 3 {
		if killed == 0 {
			c.rep.error(command.ErrNoSuchClient)
		} else {
			c.rep.conn.WriteString("OK")
		}
	} else {
		c.rep.conn.WriteInt(killed)
	}
	if self {
		return cmdQuit // closed once the reply is flushed
	}
	return cmdOK
}

// kill closes another client's connection now: it leaves CLIENT LIST at
// once, and a deadline in the past ends the read its goroutine waits in
// (or the write it is blocked on); what it has not sent is dropped, as
// Redis drops a killed client's output.
func (s *Server) kill(cl *client) {
	s.mu.Lock()
	delete(s.clients, cl.id)
	s.mu.Unlock()
	cn := cl.rep.conn
	cn.killed.Store(true)
	cn.nc.SetDeadline(time.Unix(1, 0))
}

// cmdClientUnblock: CLIENT UNBLOCK id [TIMEOUT|ERROR], as Redis: 1 when
// client id was parked by a blocking command (block.go), which then
// replies as on its timeout or with an UNBLOCKED error; 0 otherwise.
func cmdClientUnblock(s *Server, c *client, args [][]byte) outcome {
	if len(args) > 4 {
		c.rep.error("ERR unknown subcommand or wrong number of arguments for 'unblock'. Try CLIENT HELP.")
		return cmdOK
	}
	withError := false
	if len(args) == 4 {
		switch {
		case command.EqualFold(args[3], "timeout"):
		case command.EqualFold(args[3], "error"):
			withError = true
		default:
			c.rep.error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
			return cmdOK
		}
	}
	id, ok := command.ParseInt(args[2])
	if !ok {
		c.rep.error(command.ErrNotInteger)
		return cmdOK
	}
	n := 0
	if s.blocked.unblock(id, withError) {
		n = 1
	}
	c.rep.conn.WriteInt(n)
	return cmdOK
}

// cmdClientNoEvict: CLIENT NO-EVICT on|off. rlserver never evicts clients
// (maxmemory acts on keys); the mode is kept and shown as flag e, as
// Redis shows it.
func cmdClientNoEvict(_ *Server, c *client, args [][]byte) outcome {
	var on bool
	switch {
	case command.EqualFold(args[2], "on"):
		on = true
	case command.EqualFold(args[2], "off"):
	default:
		c.rep.error(command.ErrSyntax)
		return cmdOK
	}
	c.mu.Lock()
	c.noEvict = on
	c.mu.Unlock()
	c.rep.conn.WriteString("OK")
	return cmdOK
}

// cmdClientReply: CLIENT REPLY ON|OFF|SKIP, as Redis: OFF drops every
// reply (its own included) until ON, which answers +OK; SKIP drops its
// own reply and the next command's (and does nothing while OFF). Errors
// are dropped too.
func cmdClientReply(_ *Server, c *client, args [][]byte) outcome {
	switch {
	case command.EqualFold(args[2], "on"):
		c.replyOff, c.replySkip, c.replySkipNext = false, false, false
		c.rep.conn.unmute()
		c.rep.conn.WriteString("OK")
	case command.EqualFold(args[2], "off"):
		c.replyOff = true
	case command.EqualFold(args[2], "skip"):
		if !c.replyOff {
			c.replySkipNext = true
		}
	default:
		c.rep.error(command.ErrSyntax)
		return cmdOK
	}
	c.quiet = c.replyOff || c.replySkip || c.replySkipNext
	return cmdOK
}

// resetReplyMode is RESET's part: replies are on again from this one on,
// unless this command is the one a SKIP drops (as in Redis, which clears
// OFF and a pending SKIP but not the current one).
func (c *client) resetReplyMode() {
	c.replyOff, c.replySkipNext = false, false
	if !c.replySkip {
		c.rep.conn.unmute()
	}
	c.quiet = c.replySkip
}

// processQuiet runs one command while CLIENT REPLY is OFF or SKIP: each
// command is answered on its own (its batch flushed) so that exactly its
// replies are dropped. A SKIP read before this command applies to it.
func (s *Server) processQuiet(c *client, args [][]byte) outcome {
	s.flushBatch(c) // earlier commands' replies are sent
	c.replySkip, c.replySkipNext = c.replySkipNext, false
	if c.replyOff || c.replySkip {
		c.rep.conn.mute()
	}
	out := s.process(c, args)
	s.flushBatch(c)
	c.rep.conn.unmute()
	c.replySkip = false
	c.quiet = c.replyOff || c.replySkipNext
	return out
}
