// Package resp is RESP, the Redis serialization protocol: reading and
// validating the frames clients send (Reader, behind the framing guard of
// GuardListener) and writing replies (Writer, AppendInt).
package resp

import (
	"bytes"
	"errors"
	"io"
	"net"
)

// Reader reads the commands a client sends on one connection.
//
// redcon's reader copies every command and allocates its argument slice
// (about 500 bytes and two allocations per command, most of the CPU of a
// pipelined RL.ALLOW); Reader parses a whole pipeline in place: the
// arguments of every complete command in the buffer are slices of the
// buffer, gathered in one reused slice, and stay valid until the next
// ReadCommands. A connection therefore allocates nothing per command.
//
// Behind a GuardConn the reader runs the guard in lazy mode (guard.go):
// the reader validates the frames it can vouch for itself and hands the
// guard the rest, so every frame it parses is well-formed; the parser
// still checks bounds so that no input can make it panic. Its fields
// belong to the one goroutine that reads.
type Reader struct {
	nc net.Conn

	// BeforeRead, when set, is called before each read of the
	// connection with whether part of a command is buffered (the
	// server arms its read deadlines there).
	BeforeRead func(partial bool)

	buf        []byte // bytes read; buf[start:end] not yet parsed
	start, end int
	argv       [][]byte // arguments of the parsed commands, back to back
	cmdEnds    []int    // cmdEnds[i] is the end of command i in argv
	cmds       [][][]byte
	inline     []byte // unescaped inline arguments (they are not slices of buf)
	maxQuery   int    // the largest a single pending command may grow
	filled     bool   // the last read filled all the room it had
	netIn      int    // bytes read not yet taken by TakeBytesRead

	// g is the guard in front of the socket, in lazy mode (guard.go):
	// buf[:checked] has been validated, by the guard or by parseChecked;
	// the bytes after it, when there are any, start at a frame boundary
	// and have not. stop, when >= 0, is where a bad frame starts: nothing
	// from there on is parsed.
	g             *GuardConn
	checked, stop int
}

// A connection's read buffer starts at firstChunk bytes, so an idle
// connection costs little, and doubles up to readChunk each time a read
// fills it (a client that pipelines); only a single command larger than
// that grows it further, up to maxQuery.
const (
	firstChunk = 1 << 10
	readChunk  = 16 << 10
)

// ErrQueryBuffer ends a connection whose pending command outgrew the
// query buffer limit; the client is owed TextQueryBuffer.
var ErrQueryBuffer = errors.New("query buffer limit")

// NewReader returns a reader of nc's commands whose pending command may
// occupy at most maxQuery bytes. When nc is a *GuardConn, the reader
// takes over validating the frames it parses (lazy mode).
func NewReader(nc net.Conn, maxQuery int) *Reader {
	r := &Reader{nc: nc, buf: make([]byte, firstChunk), maxQuery: maxQuery, stop: -1}
	if g, ok := nc.(*GuardConn); ok {
		g.lazy = true
		r.g = g
	}
	return r
}

// TakeBytesRead returns the bytes read from the connection since the
// last call.
func (r *Reader) TakeBytesRead() int {
	n := r.netIn
	r.netIn = 0
	return n
}

// ReadCommands returns the commands that are complete in the buffer,
// reading from the connection until at least one is: each command is its
// arguments, never none. The returned slices are valid until the next
// call. An inline line whose quotes do not close is returned as a command
// for which UnbalancedQuotes reports true. The error is the connection's
// read error, io.EOF after a frame the guard refuses (it has written the
// error line), or ErrQueryBuffer.
func (r *Reader) ReadCommands() ([][][]byte, error) {
	for {
		cmds := r.parse()
		if len(cmds) > 0 {
			return cmds, nil
		}
		if err := r.fill(); err != nil {
			return nil, err
		}
	}
}

// fill reads more bytes, first moving the unparsed tail to the front and
// growing the buffer when a single command needs more room.
func (r *Reader) fill() error {
	if r.stop >= 0 && r.start >= r.stop {
		// A bad frame is next: the guard writes its error line and
		// ends the stream.
		_, err := r.nc.Read(nil)
		if err == nil {
			err = io.ErrNoProgress
		}
		return err
	}
	if r.start > 0 {
		n := copy(r.buf, r.buf[r.start:r.end])
		r.checked -= r.start
		if r.stop >= 0 {
			r.stop -= r.start
		}
		r.start, r.end = 0, n
	}
	grow := 0
	switch {
	case r.end == len(r.buf):
		if len(r.buf) >= r.maxQuery {
			return ErrQueryBuffer
		}
		grow = min(2*len(r.buf), r.maxQuery)
	case r.filled && len(r.buf) < readChunk:
		grow = min(2*len(r.buf), readChunk)
	}
	if grow > 0 {
		nb := make([]byte, grow)
		copy(nb, r.buf[:r.end])
		r.buf = nb
	}
	if r.BeforeRead != nil {
		r.BeforeRead(r.end > r.start)
	}
	n, err := r.nc.Read(r.buf[r.end:])
	r.filled = n == len(r.buf)-r.end
	if r.g != nil && r.g.raw {
		r.checked = r.end + r.g.rawFrom
	} else {
		r.checked = r.end + n
	}
	r.end += n
	r.netIn += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// parse splits the complete commands at the front of the buffer.
func (r *Reader) parse() [][][]byte {
	r.argv = r.argv[:0]
	r.cmdEnds = r.cmdEnds[:0]
	r.inline = r.inline[:0]
	var lim *guardValidator // the guard's limits, read once per batch
	if r.g != nil && r.checked < r.end {
		lim = r.g.limits()
	}
	end := r.end
	for r.start < end {
		if r.stop >= 0 {
			end = r.stop
			if r.start >= end {
				break
			}
		}
		if r.start >= r.checked && lim != nil {
			if r.parseChecked(lim) {
				r.checked = r.start
				continue
			}
			// A frame parseChecked does not vouch for (incomplete,
			// inline, unusual or bad): the guard judges it.
			ok := r.g.check(r.buf[r.checked:r.end])
			if ok == 0 {
				r.stop = r.checked
			}
			r.checked += ok
			continue
		}
		var ok bool
		if r.buf[r.start] == '*' {
			ok = r.parseMultibulk()
		} else {
			ok = r.parseInline()
		}
		if !ok {
			break
		}
	}
	if len(r.cmdEnds) == 0 {
		return nil
	}
	r.cmds = r.cmds[:0]
	from := 0
	for _, to := range r.cmdEnds {
		r.cmds = append(r.cmds, r.argv[from:to:to])
		from = to
	}
	return r.cmds
}

// parseMultibulk parses `*N\r\n` and N `$len\r\nbytes\r\n` at r.start.
// It reports false when the frame is not complete yet.
func (r *Reader) parseMultibulk() bool {
	b := r.buf[r.start:r.parseEnd()]
	n, i, ok := parseLine(b, 1)
	if !ok {
		return false
	}
	first := len(r.argv)
	for range n {
		if i >= len(b) {
			r.argv = r.argv[:first]
			return false
		}
		size, next, ok := parseLine(b, i+1)
		if !ok || size < 0 || size > len(b)-next-2 {
			r.argv = r.argv[:first]
			return false
		}
		r.argv = append(r.argv, b[next:next+size:next+size])
		i = next + size + 2
	}
	r.start += i
	if n > 0 { // *0 and *-1 are empty frames: skipped, as Redis does
		r.cmdEnds = append(r.cmdEnds, len(r.argv))
	}
	return true
}

// parseEnd is where parsing stops: the end of the bytes read, or the
// start of a bad frame.
func (r *Reader) parseEnd() int {
	if r.stop >= 0 {
		return r.stop
	}
	return r.end
}

// parseChecked parses the multibulk frame at r.start, not yet validated,
// if it is complete and plainly within the guard's limits (v's): a count of 1
// or more and bulk lengths in canonical form (no sign, no leading zero)
// within the limits, each bulk followed by "\r\n". Any such frame is
// one the guard accepts. It reports false, having parsed nothing, for
// anything else, which the guard then judges.
func (r *Reader) parseChecked(v *guardValidator) bool {
	b := r.buf[r.start:r.end]
	if len(b) < 4 || b[0] != '*' || b[1] == '0' {
		return false
	}
	n, i, ok := guardLine(b, 1, v.maxArgs)
	if !ok {
		return false
	}
	first := len(r.argv)
	for range n {
		if i >= len(b) || b[i] != '$' {
			r.argv = r.argv[:first]
			return false
		}
		size, next, ok := guardLine(b, i+1, v.maxBulk)
		end := next + int(size) // size <= 2^40: no overflow
		if !ok || end+2 > len(b) || b[end] != '\r' || b[end+1] != '\n' {
			r.argv = r.argv[:first]
			return false
		}
		r.argv = append(r.argv, b[next:end:end])
		i = end + 2
	}
	r.start += i
	r.cmdEnds = append(r.cmdEnds, len(r.argv))
	return true
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
func (r *Reader) parseInline() bool {
	b := r.buf[r.start:r.parseEnd()]
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		return false
	}
	line := b[:nl]
	r.start += nl + 1
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	first := len(r.argv)
	args, ok := splitInline(line, r.inline)
	if !ok {
		// Unbalanced quotes: the command becomes an error reply.
		r.argv = append(r.argv, unbalancedQuotes)
		r.cmdEnds = append(r.cmdEnds, len(r.argv))
		return true
	}
	r.inline = args.store
	r.argv = append(r.argv, args.argv...)
	if len(r.argv) > first {
		r.cmdEnds = append(r.cmdEnds, len(r.argv))
	}
	return true
}

// unbalancedQuotes marks an inline command whose quotes do not close; the
// server answers it with TextUnbalancedQuotes and closes.
var unbalancedQuotes = []byte("\x00unbalanced-quotes")

// UnbalancedQuotes reports whether args is the command ReadCommands
// returns for an inline line whose quotes do not close.
func UnbalancedQuotes(args [][]byte) bool {
	return len(args) == 1 && len(args[0]) == len(unbalancedQuotes) && &args[0][0] == &unbalancedQuotes[0]
}

// SplitArgs splits line into arguments with Redis's quoting rules, as an
// inline command is split (Redis's sdssplitargs: redis.conf and ACL files
// use them too). It reports false when a quote does not close.
func SplitArgs(line []byte) ([][]byte, bool) {
	args, ok := splitInline(line, nil)
	return args.argv, ok
}

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
