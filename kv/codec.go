package kv

import (
	"encoding/binary"
	"errors"

	"github.com/rlserver/rlserver/engine"
)

// The encoding of a command in a Raft log entry or a forwarded batch:
//
//	byte    form: 1 a command, 2 a transaction, 3 WATCH's digest read
//	byte    flags: bit 0 RESP3
//	command:     uvarint argc, then argc times uvarint len and the bytes
//	transaction: uvarint watches, each a key (uvarint len, bytes) and its
//	             digest (8 bytes, little-endian); uvarint commands, each
//	             a command as above
//
// Append-only: a new form gets a new byte.
const (
	formCmd    = 1
	formTxn    = 2
	formDigest = 3
)

// ErrCorrupt reports an encoding that no Append wrote.
var ErrCorrupt = errors.New("kv: undecodable command")

// Append appends the encoding of c, a *Cmd or *Txn, to dst.
func Append(dst []byte, c engine.Command) []byte {
	switch c := c.(type) {
	case *Cmd:
		form := byte(formCmd)
		if c.spec == digestSpec {
			form = formDigest
		}
		dst = append(dst, form, flags(c.RESP3))
		return appendArgs(dst, c.Args)
	case *Txn:
		dst = append(dst, formTxn, flags(c.RESP3))
		dst = binary.AppendUvarint(dst, uint64(len(c.Watches)))
		for _, w := range c.Watches {
			dst = binary.AppendUvarint(dst, uint64(len(w.Key)))
			dst = append(dst, w.Key...)
			dst = binary.LittleEndian.AppendUint64(dst, w.Digest)
		}
		dst = binary.AppendUvarint(dst, uint64(len(c.Cmds)))
		for _, cmd := range c.Cmds {
			dst = appendArgs(dst, cmd.Args)
		}
		return dst
	}
	panic("kv: Append of a foreign command")
}

func flags(resp3 bool) byte {
	if resp3 {
		return 1
	}
	return 0
}

func appendArgs(dst []byte, args [][]byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(args)))
	for _, a := range args {
		dst = binary.AppendUvarint(dst, uint64(len(a)))
		dst = append(dst, a...)
	}
	return dst
}

type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.bad || n > uint64(len(d.b)) {
		d.bad = true
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) cmd(resp3 bool, digest bool) *Cmd {
	argc := d.uvarint()
	if d.bad || argc == 0 || argc > uint64(len(d.b)) {
		d.bad = true
		return nil
	}
	args := make([][]byte, argc)
	for i := range args {
		args[i] = d.bytes()
	}
	if d.bad {
		return nil
	}
	s := digestSpec
	if !digest {
		var ok bool
		if s, ok = Lookup(args[0]); !ok {
			if s, ok = internal[string(args[0])]; !ok {
				d.bad = true
				return nil
			}
		}
	}
	if !s.ArityOK(len(args)) {
		d.bad = true
		return nil
	}
	return New(s, args, resp3)
}

// Decode decodes one command written by Append, which must fill b. The
// command's arguments alias b.
func Decode(b []byte) (engine.Command, error) {
	if len(b) < 2 || b[1]&^1 != 0 {
		return nil, ErrCorrupt
	}
	d := decoder{b: b[2:]}
	resp3 := b[1] == 1
	var out engine.Command
	switch b[0] {
	case formCmd, formDigest:
		c := d.cmd(resp3, b[0] == formDigest)
		if c != nil {
			out = c
		}
	case formTxn:
		nw := d.uvarint()
		if nw > uint64(len(d.b)) {
			return nil, ErrCorrupt
		}
		watches := make([]Watch, nw)
		for i := range watches {
			watches[i].Key = d.bytes()
			if len(d.b) < 8 {
				d.bad = true
				break
			}
			watches[i].Digest = binary.LittleEndian.Uint64(d.b)
			d.b = d.b[8:]
		}
		nc := d.uvarint()
		if d.bad || nc > uint64(len(d.b)) {
			return nil, ErrCorrupt
		}
		cmds := make([]*Cmd, nc)
		for i := range cmds {
			cmds[i] = d.cmd(resp3, false)
		}
		if d.bad {
			return nil, ErrCorrupt // a command that did not decode is nil
		}
		out = NewTxn(cmds, watches, resp3)
	default:
		return nil, ErrCorrupt
	}
	if d.bad || len(d.b) != 0 || out == nil {
		return nil, ErrCorrupt
	}
	return out, nil
}
