package server

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"
)

// conn is one client connection: rlserver's own read loop over the guarded
// byte stream, with redcon's Writer for replies.
//
// redcon's reader copies every command and allocates its argument slice
// (about 500 bytes and two allocations per command, most of the CPU of a
// pipelined RL.ALLOW); this reader parses a whole pipeline in place: the
// arguments of every complete command in the buffer are slices of the
// buffer, gathered in one reused slice, and stay valid until the batch has
// been answered. A connection therefore allocates nothing per command.
//
// The guard in front of it has already enforced the framing limits, so
// every frame the parser sees is well-formed; the parser still checks
// bounds so that no input can make it panic.
type conn struct {
	nc   net.Conn
	wr   *redcon.Writer // where replies go: out, or sink while muted
	out  *redcon.Writer // the connection's writer
	sink *redcon.Writer // discards (CLIENT REPLY OFF/SKIP); made on first use
	addr string

	buf        []byte // bytes read; buf[start:end] not yet parsed
	start, end int
	argv       [][]byte // arguments of the parsed commands, back to back
	cmdEnds    []int    // cmdEnds[i] is the end of command i in argv
	cmds       [][][]byte
	inline     []byte // unescaped inline arguments (they are not slices of buf)
	maxQuery   int    // the largest a single pending command may grow
	filled     bool   // the last read filled all the room it had
	netIn      int    // bytes read not yet added to Stats.NetInputBytes
	netOut     int    // bytes written not yet added to Stats.NetOutputBytes
	closed     bool

	// g is the guard in front of the socket, in lazy mode (guard.go):
	// buf[:checked] has been validated, by the guard or by parseChecked;
	// the bytes after it, when there are any, start at a frame boundary
	// and have not. stop, when >= 0, is where a bad frame starts: nothing
	// from there on is parsed.
	g             *guardConn
	checked, stop int

	// A command that has started to arrive must finish within
	// partialTimeout (0: no limit); an idle connection has no deadline.
	partialTimeout time.Duration
	deadlineSet    bool
	stopping       *atomic.Bool // the server is shutting down: reads end now
	killed         atomic.Bool  // CLIENT KILL: reads end now (client.go)
}

// A connection's read buffer starts at firstChunk bytes, so an idle
// connection costs little, and doubles up to readChunk each time a read
// fills it (a client that pipelines); only a single command larger than
// that grows it further, up to maxQuery.
const (
	firstChunk = 1 << 10
	readChunk  = 16 << 10
)

var errQueryBuffer = errors.New("query buffer limit")

func newConn(nc net.Conn, maxQuery int) *conn {
	c := &conn{nc: nc, addr: nc.RemoteAddr().String(),
		buf: make([]byte, firstChunk), maxQuery: maxQuery, stop: -1}
	if g, ok := nc.(*guardConn); ok {
		g.lazy = true
		c.g = g
	}
	c.out = redcon.NewWriter(countingWriter{c})
	c.wr = c.out
	return c
}

// countingWriter writes replies to the connection and counts their bytes
// (redcon's Writer.Buffer would copy the buffer to measure it).
type countingWriter struct{ c *conn }

func (w countingWriter) Write(p []byte) (int, error) {
	n, err := w.c.nc.Write(p)
	w.c.netOut += n
	return n, err
}

// readPipeline returns the commands that are complete in the buffer,
// reading from the socket until at least one is. The returned slices are
// valid until the next call.
func (c *conn) readPipeline() ([][][]byte, error) {
	for {
		cmds := c.parse()
		if len(cmds) > 0 {
			return cmds, nil
		}
		if err := c.fill(); err != nil {
			return nil, err
		}
	}
}

// fill reads more bytes, first moving the unparsed tail to the front and
// growing the buffer when a single command needs more room.
func (c *conn) fill() error {
	if c.stop >= 0 && c.start >= c.stop {
		// A bad frame is next: the guard writes its error line and
		// ends the stream.
		_, err := c.nc.Read(nil)
		if err == nil {
			err = io.ErrNoProgress
		}
		return err
	}
	if c.start > 0 {
		n := copy(c.buf, c.buf[c.start:c.end])
		c.checked -= c.start
		if c.stop >= 0 {
			c.stop -= c.start
		}
		c.start, c.end = 0, n
	}
	grow := 0
	switch {
	case c.end == len(c.buf):
		if len(c.buf) >= c.maxQuery {
			return errQueryBuffer
		}
		grow = min(2*len(c.buf), c.maxQuery)
	case c.filled && len(c.buf) < readChunk:
		grow = min(2*len(c.buf), readChunk)
	}
	if grow > 0 {
		nb := make([]byte, grow)
		copy(nb, c.buf[:c.end])
		c.buf = nb
	}
	c.armDeadline()
	n, err := c.nc.Read(c.buf[c.end:])
	c.filled = n == len(c.buf)-c.end
	if c.g != nil && c.g.raw {
		c.checked = c.end + c.g.rawFrom
	} else {
		c.checked = c.end + n
	}
	c.end += n
	c.netIn += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// armDeadline sets the read deadline for the next read: partialTimeout
// from now while part of a command is buffered, none while idle, and one in
// the past once the server is stopping. The stopping check comes after the
// deadline is set, so a concurrent Shutdown's past deadline is never lost.
func (c *conn) armDeadline() {
	partial := c.end > c.start && c.partialTimeout > 0
	switch {
	case partial:
		c.nc.SetReadDeadline(time.Now().Add(c.partialTimeout))
		c.deadlineSet = true
	case c.deadlineSet:
		c.nc.SetReadDeadline(time.Time{})
		c.deadlineSet = false
	}
	if c.stopping != nil && c.stopping.Load() || c.killed.Load() {
		c.nc.SetReadDeadline(time.Unix(1, 0))
		c.deadlineSet = true
	}
}

// parse splits the complete commands at the front of the buffer.
func (c *conn) parse() [][][]byte {
	c.argv = c.argv[:0]
	c.cmdEnds = c.cmdEnds[:0]
	c.inline = c.inline[:0]
	var lim *guardValidator // the guard's limits, read once per batch
	if c.g != nil && c.checked < c.end {
		lim = c.g.limits()
	}
	end := c.end
	for c.start < end {
		if c.stop >= 0 {
			end = c.stop
			if c.start >= end {
				break
			}
		}
		if c.start >= c.checked && lim != nil {
			if c.parseChecked(lim) {
				c.checked = c.start
				continue
			}
			// A frame parseChecked does not vouch for (incomplete,
			// inline, unusual or bad): the guard judges it.
			ok := c.g.check(c.buf[c.checked:c.end])
			if ok == 0 {
				c.stop = c.checked
			}
			c.checked += ok
			continue
		}
		var ok bool
		if c.buf[c.start] == '*' {
			ok = c.parseMultibulk()
		} else {
			ok = c.parseInline()
		}
		if !ok {
			break
		}
	}
	if len(c.cmdEnds) == 0 {
		return nil
	}
	c.cmds = c.cmds[:0]
	from := 0
	for _, to := range c.cmdEnds {
		c.cmds = append(c.cmds, c.argv[from:to:to])
		from = to
	}
	return c.cmds
}

// parseMultibulk parses `*N\r\n` and N `$len\r\nbytes\r\n` at c.start.
// It reports false when the frame is not complete yet.
func (c *conn) parseMultibulk() bool {
	b := c.buf[c.start:c.parseEnd()]
	n, i, ok := parseLine(b, 1)
	if !ok {
		return false
	}
	first := len(c.argv)
	for range n {
		if i >= len(b) {
			c.argv = c.argv[:first]
			return false
		}
		size, next, ok := parseLine(b, i+1)
		if !ok || size < 0 || size > len(b)-next-2 {
			c.argv = c.argv[:first]
			return false
		}
		c.argv = append(c.argv, b[next:next+size:next+size])
		i = next + size + 2
	}
	c.start += i
	if n > 0 { // *0 and *-1 are empty frames: skipped, as Redis does
		c.cmdEnds = append(c.cmdEnds, len(c.argv))
	}
	return true
}

// parseEnd is where parsing stops: the end of the bytes read, or the
// start of a bad frame.
func (c *conn) parseEnd() int {
	if c.stop >= 0 {
		return c.stop
	}
	return c.end
}

// parseChecked parses the multibulk frame at c.start, not yet validated,
// if it is complete and plainly within the guard's limits (v's): a count of 1
// or more and bulk lengths in canonical form (no sign, no leading zero)
// within the limits, each bulk followed by "\r\n". Any such frame is
// one the guard accepts. It reports false, having parsed nothing, for
// anything else, which the guard then judges.
func (c *conn) parseChecked(v *guardValidator) bool {
	b := c.buf[c.start:c.end]
	if len(b) < 4 || b[0] != '*' || b[1] == '0' {
		return false
	}
	n, i, ok := checkedLine(b, 1, v.maxArgs)
	if !ok {
		return false
	}
	first := len(c.argv)
	for range n {
		if i >= len(b) || b[i] != '$' {
			c.argv = c.argv[:first]
			return false
		}
		size, next, ok := checkedLine(b, i+1, v.maxBulk)
		end := next + int(size) // size <= 2^40: no overflow
		if !ok || end+2 > len(b) || b[end] != '\r' || b[end+1] != '\n' {
			c.argv = c.argv[:first]
			return false
		}
		c.argv = append(c.argv, b[next:end:end])
		i = end + 2
	}
	c.start += i
	c.cmdEnds = append(c.cmdEnds, len(c.argv))
	return true
}

// checkedLine reads a number in canonical form ("0", or no leading zero)
// of up to 12 digits at b[from:], at most lim, and the "\r\n" after it;
// it returns the number and the index after the line. (Limits are at most
// 2^40, 13 digits: a longer number is left to the guard, as is anything
// else.)
func checkedLine(b []byte, from int, lim uint64) (n uint64, next int, ok bool) {
	i := from
	for ; i < len(b) && i-from < 12; i++ {
		d := b[i] - '0'
		if d > 9 {
			break
		}
		n = n*10 + uint64(d)
	}
	if i == from || (b[from] == '0' && i > from+1) || n > lim || i+1 >= len(b) || b[i] != '\r' || b[i+1] != '\n' {
		return 0, 0, false
	}
	return n, i + 2, true
}

// parseLine reads the decimal number in b[from:] up to CRLF and returns it
// with the index after the CRLF. The guard has validated the framing, so
// this is a plain digit loop (a header is short); it still refuses
// anything malformed: an optional '-', 1 to 19 digits within int64, then
// "\r\n".
func parseLine(b []byte, from int) (n, next int, ok bool) {
	i := from
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start := i
	var v uint64
	for ; i < len(b) && i-start < 20; i++ {
		d := b[i] - '0'
		if d > 9 {
			break
		}
		v = v*10 + uint64(d) // at most 19 digits: no overflow of uint64
	}
	if i == start || i-start > 19 || i+1 >= len(b) || b[i] != '\r' || b[i+1] != '\n' {
		return 0, 0, false
	}
	switch {
	case neg && v <= 1<<63:
		n = int(-v)
	case !neg && v <= 1<<63-1:
		n = int(v)
	default:
		return 0, 0, false
	}
	return n, i + 2, true
}

// parseInline splits a telnet-style line into arguments, with Redis's
// quoting rules: "double quotes" with \n \r \t \b \a \\ \" \xHH escapes,
// 'single quotes' with \' only. An empty line is skipped.
func (c *conn) parseInline() bool {
	b := c.buf[c.start:c.parseEnd()]
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		return false
	}
	line := b[:nl]
	c.start += nl + 1
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	first := len(c.argv)
	args, ok := splitInline(line, c.inline)
	if !ok {
		// Unbalanced quotes: the command becomes an error reply.
		c.argv = append(c.argv, unbalancedQuotes)
		c.cmdEnds = append(c.cmdEnds, len(c.argv))
		return true
	}
	c.inline = args.store
	c.argv = append(c.argv, args.argv...)
	if len(c.argv) > first {
		c.cmdEnds = append(c.cmdEnds, len(c.argv))
	}
	return true
}

// unbalancedQuotes marks an inline command whose quotes do not close; the
// server answers it with Redis's protocol error and closes.
var unbalancedQuotes = []byte("\x00unbalanced-quotes")

type inlineArgs struct {
	argv  [][]byte
	store []byte
}

func splitInline(line, store []byte) (inlineArgs, bool) {
	var out inlineArgs
	i := 0
	for {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i == len(line) {
			out.store = store
			return out, true
		}
		begin := len(store)
		switch line[i] {
		case '"':
			i++
			for {
				if i >= len(line) {
					return out, false
				}
				ch := line[i]
				if ch == '\\' && i+3 < len(line) && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]) {
					store = append(store, unhex(line[i+2])<<4|unhex(line[i+3]))
					i += 4
					continue
				}
				if ch == '\\' && i+1 < len(line) {
					i++
					switch ch = line[i]; ch {
					case 'n':
						ch = '\n'
					case 'r':
						ch = '\r'
					case 't':
						ch = '\t'
					case 'b':
						ch = '\b'
					case 'a':
						ch = '\a'
					}
					store = append(store, ch)
					i++
					continue
				}
				if ch == '"' {
					i++
					if i < len(line) && line[i] != ' ' && line[i] != '\t' {
						return out, false // closing quote must be followed by a space
					}
					break
				}
				store = append(store, ch)
				i++
			}
		case '\'':
			i++
			for {
				if i >= len(line) {
					return out, false
				}
				ch := line[i]
				if ch == '\\' && i+1 < len(line) && line[i+1] == '\'' {
					store = append(store, '\'')
					i += 2
					continue
				}
				if ch == '\'' {
					i++
					if i < len(line) && line[i] != ' ' && line[i] != '\t' {
						return out, false
					}
					break
				}
				store = append(store, ch)
				i++
			}
		default:
			for i < len(line) && line[i] != ' ' && line[i] != '\t' {
				store = append(store, line[i])
				i++
			}
		}
		out.argv = append(out.argv, store[begin:len(store):len(store)])
	}
}

func isHex(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F'
}

func unhex(b byte) byte {
	switch {
	case b <= '9':
		return b - '0'
	case b >= 'a':
		return b - 'a' + 10
	}
	return b - 'A' + 10
}

// What the command handlers write replies with (redcon's Writer underneath).

func (c *conn) RemoteAddr() string       { return c.addr }
func (c *conn) NetConn() net.Conn        { return c.nc }
func (c *conn) WriteError(msg string)    { c.wr.WriteError(msg) }
func (c *conn) WriteString(s string)     { c.wr.WriteString(s) }
func (c *conn) WriteBulk(b []byte)       { c.wr.WriteBulk(b) }
func (c *conn) WriteBulkString(s string) { c.wr.WriteBulkString(s) }
func (c *conn) WriteInt(n int)           { c.wr.WriteInt(n) }
func (c *conn) WriteInt64(n int64)       { c.wr.WriteInt64(n) }
func (c *conn) WriteArray(n int)         { c.wr.WriteArray(n) }
func (c *conn) WriteNull()               { c.wr.WriteNull() }
func (c *conn) WriteRaw(b []byte)        { c.wr.WriteRaw(b) }

// mute makes the replies written from now on vanish, until unmute.
func (c *conn) mute() {
	if c.sink == nil {
		c.sink = redcon.NewWriter(io.Discard)
	}
	c.wr = c.sink
}

// unmute sends replies to the client again.
func (c *conn) unmute() {
	if c.wr == c.sink && c.sink != nil {
		c.sink.Flush() // empties its buffer
		c.wr = c.out
	}
}

// Close flushes pending replies and closes the connection.
func (c *conn) Close() error {
	c.wr.Flush()
	c.closed = true
	return c.nc.Close()
}
