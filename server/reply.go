package server

import "github.com/rlserver/rlserver/kv"

// replier writes replies in the connection's protocol version (resp.Writer)
// and counts the error replies.
type replier struct {
	conn   *conn
	kw     kv.Writer   // the batched commands' replies are rendered into it (command.RenderFunc)
	errors int64       // error replies written since the server last counted them
	errs   *errorStats // counts them by code; nil: not counted
}

// error writes an error reply and counts it for INFO.
func (r *replier) error(text string) {
	r.errors++
	if r.errs != nil {
		r.errs.add(text)
	}
	r.conn.WriteError(text)
}

// failedRaw counts reply, an error reply already in RESP ("-CODE
// text\r\n", a script's), as error does.
func (r *replier) failedRaw(reply []byte) {
	r.errors++
	if r.errs != nil && len(reply) > 3 && reply[0] == '-' {
		r.errs.add(string(reply[1 : len(reply)-2]))
	}
}

// resp3 reports whether the connection speaks RESP3 (HELLO 3).
func (r *replier) resp3() bool { return r.conn.w.RESP3() }

// mapHeader starts a map of n pairs (an array of 2n in RESP2).
func (r *replier) mapHeader(n int) { r.conn.w.WriteMap(n) }

func (r *replier) null() { r.conn.w.WriteNil() }

// verbatim writes a text reply (INFO, CLIENT INFO): a verbatim string in
// RESP3, a bulk string in RESP2.
func (r *replier) verbatim(s string) { r.conn.w.WriteVerbatim(s) }
