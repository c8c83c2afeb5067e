// Package resp is RESP, the Redis serialization protocol: reading and
// validating the frames clients send (Reader, against the limits each of
// GuardListener's connections holds) and writing replies (Writer, AppendInt).
package resp

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync/atomic"
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
// The Reader is also where framing is validated: every frame it parses
// is judged, as it is parsed, against the limits of the GuardConn it reads
// (DefaultGuardLimits for any other connection), with Redis's rules and
// error texts. The commands before a bad frame are returned first; the
// next ReadCommands writes the error line to the connection and reports
// io.EOF. Its fields belong to the one goroutine that reads.
type Reader struct {
	nc net.Conn
	g  *GuardConn // nc, when it holds the limits

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

	// What Buffered reports to other goroutines (CLIENT LIST): the
	// unprocessed bytes buf[start:end], stored just before and just after
	// each read of the connection (start is 0 then), and len(buf), stored
	// when the buffer is made or grown.
	queued, size atomic.Int64

	// part is the progress through the multibulk at buf[start] that is
	// not complete yet: its count, and how many of its bulks have been
	// validated. A later parse re-slices those without judging them again,
	// so a limit that changes meanwhile applies to the bulks that follow,
	// as it does in Redis. count 0: no frame under way.
	part struct{ count, done int }

	bad      guardErr // the violation of the frame at buf[start], once found
	got      byte     // for guardDollar, the byte found instead of '$'
	reported bool     // the error line has been written
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
// occupy at most maxQuery bytes. Frames are validated against the limits
// nc holds when it is a *GuardConn, else against DefaultGuardLimits.
func NewReader(nc net.Conn, maxQuery int) *Reader {
	r := &Reader{nc: nc, buf: make([]byte, firstChunk), maxQuery: maxQuery}
	r.g, _ = nc.(*GuardConn)
	r.size.Store(firstChunk)
	return r
}

// Buffered reports, from any goroutine, how many bytes of the read buffer
// hold input not processed yet and how much room follows them, as of the
// connection's last read: while the reader waits for the rest of a
// command, used is the part received; while it processes a pipeline, used
// is the pipeline and whatever followed it in the same read.
func (r *Reader) Buffered() (used, free int) {
	used, size := int(r.queued.Load()), int(r.size.Load())
	return used, max(size-used, 0)
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
// call. Before AUTH (GuardConn.Restrict) it returns one command at a time.
// An inline line whose quotes do not close is returned as a command for
// which UnbalancedQuotes reports true. The error is the connection's read
// error, ErrQueryBuffer, or io.EOF after a frame that breaks the framing
// rules or limits: the commands before that frame have been returned, and
// this call has written `-ERR <text>\r\n` to the connection (once).
func (r *Reader) ReadCommands() ([][][]byte, error) {
	for {
		cmds := r.parse()
		if len(cmds) > 0 {
			return cmds, nil
		}
		if r.bad != guardOK {
			return nil, r.fail()
		}
		if err := r.fill(); err != nil {
			return nil, err
		}
	}
}

// fail writes the error line once and reports the end of the stream. A
// write error is ignored: the connection is being closed either way.
func (r *Reader) fail() error {
	if !r.reported {
		r.reported = true
		_, _ = r.nc.Write(guardErrLine(r.bad, r.got))
	}
	return io.EOF
}

// fill reads more bytes, first moving the unparsed tail to the front and
// growing the buffer when a single command needs more room.
func (r *Reader) fill() error {
	if r.start > 0 {
		n := copy(r.buf, r.buf[r.start:r.end])
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
		r.size.Store(int64(grow))
	}
	r.queued.Store(int64(r.end))
	if r.BeforeRead != nil {
		r.BeforeRead(r.end > r.start)
	}
	// A read of nothing without an error is tried again, as bufio does,
	// a hundred times at most.
	n, err := r.nc.Read(r.buf[r.end:])
	for i := 0; n == 0 && err == nil && i < 100; i++ {
		n, err = r.nc.Read(r.buf[r.end:])
	}
	r.filled = n == len(r.buf)-r.end
	r.end += n
	r.netIn += n
	r.queued.Store(int64(r.end))
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// frameLimits are the limits the frames of one parse are judged by.
type frameLimits struct {
	maxArgs, maxBulk uint64
	maxInline        int
	preAuth          bool // the limits before AUTH: one command at a time
}

var defaultFrameLimits = toFrameLimits(DefaultGuardLimits(), false)

func toFrameLimits(l GuardLimits, preAuth bool) frameLimits {
	return frameLimits{uint64(l.MaxArgs), uint64(l.MaxBulkLen), l.MaxInlineLen, preAuth}
}

// parse validates and splits the complete commands at the front of the
// buffer, up to a bad frame (r.bad then tells why).
func (r *Reader) parse() [][][]byte {
	r.argv = r.argv[:0]
	r.cmdEnds = r.cmdEnds[:0]
	r.inline = r.inline[:0]
	if r.bad != guardOK {
		return nil
	}
	lim := defaultFrameLimits // read once per batch
	if r.g != nil {
		l, preAuth := r.g.limits()
		lim = toFrameLimits(*l, preAuth)
	}
	for r.start < r.end {
		var ok bool
		if r.buf[r.start] == '*' {
			ok = r.parseMultibulk(&lim)
		} else {
			ok = r.parseInline(&lim)
		}
		if !ok || lim.preAuth && len(r.cmdEnds) > 0 {
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

// parseMultibulk validates and parses the frame at r.start that begins
// with '*': a header line `*N\r\n`, then, if N > 0, N bulks `$L\r\n`, L
// bytes, `\r\n`. N <= 0 is a frame with no elements, skipped as Redis
// does. It reports true when it consumed the frame, false when the frame
// is not complete yet or is bad (r.bad is then set). A violation is found
// at the first byte that shows it, without waiting for the rest of the
// frame: a count digit that takes N above MaxArgs, for example.
func (r *Reader) parseMultibulk(lim *frameLimits) bool {
	b := r.buf[r.start:r.end]
	first := len(r.argv)
	var n, i, done int
	if r.part.count > 0 {
		// Bulks validated by an earlier parse, under the limits then.
		n, done = r.part.count, r.part.done
		_, i, _ = parseLine(b, 1)
		for range done {
			size, next, _ := parseLine(b, i+1)
			r.argv = append(r.argv, b[next:next+size:next+size])
			i = next + size + 2
		}
	} else {
		var st headerStatus
		n, i, st = header(b, 1, lim.maxArgs, true)
		if st != headerOK {
			return r.headerFail(st, true, lim)
		}
	}
	for ; done < n; done++ {
		if i >= len(b) {
			r.part.count, r.part.done = n, done
			r.argv = r.argv[:first]
			return false
		}
		if b[i] != '$' {
			r.bad, r.got = guardDollar, b[i]
			r.argv = r.argv[:first]
			return false
		}
		size, next, st := header(b, i+1, lim.maxBulk, false)
		if st != headerOK {
			r.part.count, r.part.done = n, done
			r.argv = r.argv[:first]
			return r.headerFail(st, false, lim)
		}
		end := next + size // size <= 2^40: no overflow
		if end+2 > len(b) || b[end] != '\r' || b[end+1] != '\n' {
			// A body not followed by "\r\n" is an invalid bulk length.
			if end+2 <= len(b) || end < len(b) && b[end] != '\r' {
				r.bad = guardBulkLen
			}
			r.part.count, r.part.done = n, done
			r.argv = r.argv[:first]
			return false
		}
		r.argv = append(r.argv, b[next:end:end])
		i = end + 2
	}
	r.part.count = 0
	r.start += i
	if n > 0 {
		r.cmdEnds = append(r.cmdEnds, len(r.argv))
	}
	return true
}

// headerFail records the violation st of a count (or bulk length) header,
// if it is one, and reports false.
func (r *Reader) headerFail(st headerStatus, count bool, lim *frameLimits) bool {
	switch {
	case st == headerMore:
	case st == headerOver && lim.preAuth && count:
		r.bad = guardUnauthMultibulkLen
	case st == headerOver && lim.preAuth:
		r.bad = guardUnauthBulkLen
	case count:
		r.bad = guardMultibulkLen
	default:
		r.bad = guardBulkLen
	}
	return false
}

// headerStatus is the verdict on a header line.
type headerStatus uint8

const (
	headerOK   headerStatus = iota
	headerMore              // no violation yet, the line is not complete
	headerBad               // not a number in Redis's form, or past int64
	headerOver              // a number above the limit
)

// header reads the number of a header line at b[i:], after its sigil, up
// to and including its "\r\n", and returns it with the index after the
// line. Numbers follow Redis's string2ll: "0", or an optional '-' (counts
// only) then a digit 1-9 then digits, within int64; so "+1", "01" and "-0"
// are bad, and no valid line is longer than 20 bytes before its "\r\n". A
// number above lim (at most 2^40) is over, found at the digit that takes
// it there. A negative count is returned as -1.
func header(b []byte, i int, lim uint64, count bool) (int, int, headerStatus) {
	// Fast path: a number in canonical form within lim, and "\r\n".
	j, n := i, uint64(0)
	for ; j < len(b); j++ {
		d := b[j] - '0'
		if d > 9 {
			break
		}
		if n = n*10 + uint64(d); n > lim { // n <= lim <= 2^40 before: no overflow
			break
		}
	}
	if n <= lim && j > i && j+1 < len(b) && b[j] == '\r' && b[j+1] == '\n' && (b[i] != '0' || j == i+1) {
		return int(n), j + 2, headerOK
	}
	return headerSlow(b, i, lim, count)
}

// headerSlow is header byte by byte, for every other line, valid or not.
func headerSlow(b []byte, i int, lim uint64, count bool) (int, int, headerStatus) {
	neg, digits := false, false
	var n uint64
	for j := i; j < len(b); j++ {
		c := b[j]
		if d := c - '0'; d <= 9 {
			if digits && n == 0 || d == 0 && neg && !digits {
				return 0, 0, headerBad // a leading zero, or "-0"
			}
			digits = true
			if neg {
				if n > (1<<63)/10 {
					return 0, 0, headerBad
				}
				if n = n*10 + uint64(d); n > 1<<63 {
					return 0, 0, headerBad
				}
				continue
			}
			if n = n*10 + uint64(d); n > lim {
				return 0, 0, headerOver
			}
			continue
		}
		switch {
		case c == '\r' && digits:
			switch {
			case j+1 == len(b):
				return 0, 0, headerMore
			case b[j+1] != '\n':
				return 0, 0, headerBad
			case neg:
				return -1, j + 2, headerOK
			}
			return int(n), j + 2, headerOK
		case c == '-' && count && !neg && !digits:
			neg = true
		default:
			return 0, 0, headerBad
		}
	}
	return 0, 0, headerMore
}

// parseLine reads the decimal number in b[from:] up to CRLF and returns it
// with the index after the CRLF, for a header line header has accepted.
func parseLine(b []byte, from int) (n, next int, ok bool) {
	i := from
	for ; i < len(b) && b[i] != '\r'; i++ {
		n = n*10 + int(b[i]-'0')
	}
	return n, i + 2, true
}

// parseInline validates the line at r.start, which does not begin with '*'
// (an inline command), and splits it into arguments with Redis's quoting
// rules: "double quotes" with \n \r \t \b \a \\ \" \xHH escapes, 'single
// quotes' with \' only. An empty line is skipped. A line longer than
// MaxInlineLen before its '\n' (counting a '\r') is bad as soon as that
// many bytes have come. It reports whether it consumed a line.
func (r *Reader) parseInline(lim *frameLimits) bool {
	b := r.buf[r.start:r.end]
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		if len(b) > lim.maxInline {
			r.bad = guardInline
		}
		return false
	}
	if nl > lim.maxInline {
		r.bad = guardInline
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
