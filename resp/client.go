package resp

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rlserver/rlserver/engine"
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
	user       *aclUser // nil until authenticated (set with Server.setUser)
	lower      []byte   // scratch for the lower-cased command name
	lastLookup *command // the command last looked up by name

	// The pending batch: engine requests gathered from a pipeline, and the
	// commands whose replies wait for them, in arrival order.
	reqs    []engine.Request
	names   [][]byte // policy names of tiered requests, aligned with reqs (policy_cmd.go); may be shorter
	res     []engine.Result
	pending []pendingReply
	st      connStats // the pipeline's command tally (stats.go)
	sub     *command  // the subcommand a container just ran, for the tally
	memo    argMemo   // the last limit arguments and what they built (limiter.go)

	mu       sync.Mutex
	userName string // user's name for CLIENT LIST ("default" when none)
	name     string
	libName  string
	libVer   string
	lastCmd  string
	lastAt   time.Time
	resp     int
}

// pendingReply is a command of the pending batch: its requests are
// reqs[first:first+n]; errText, when set, is its reply instead.
type pendingReply struct {
	cmd     *command
	first   int
	n       int
	errText string
}

func newClient(id int64, conn *conn) *client {
	c := &client{id: id, addr: conn.RemoteAddr(), created: time.Now(), resp: 2, userName: "default"}
	if nc := conn.NetConn(); nc != nil {
		c.laddr = nc.LocalAddr().String()
	}
	c.rep.conn = conn
	c.lastAt = c.created
	return c
}

func (c *client) setProto(v int) {
	c.mu.Lock()
	c.resp = v
	c.mu.Unlock()
	c.rep.resp3 = v == 3
}

// info is the client's line in CLIENT LIST and CLIENT INFO, in Redis's
// field order for the fields that apply.
func (c *client) info(now time.Time) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	b.WriteString("id=" + strconv.FormatInt(c.id, 10))
	b.WriteString(" addr=" + c.addr)
	b.WriteString(" laddr=" + c.laddr)
	b.WriteString(" name=" + c.name)
	b.WriteString(" age=" + strconv.FormatInt(int64(now.Sub(c.created)/time.Second), 10))
	b.WriteString(" idle=" + strconv.FormatInt(int64(now.Sub(c.lastAt)/time.Second), 10))
	b.WriteString(" flags=N db=0 sub=0 psub=0 ssub=0 multi=-1")
	b.WriteString(" cmd=" + c.lastCmd)
	b.WriteString(" user=" + c.userName)
	b.WriteString(" lib-name=" + c.libName)
	b.WriteString(" lib-ver=" + c.libVer)
	b.WriteString(" resp=" + strconv.Itoa(c.resp))
	return b.String()
}
