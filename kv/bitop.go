package kv

import (
	"bytes"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/values"
)

// ErrBitopNot refuses BITOP NOT over more or fewer than one source key.
const ErrBitopNot = "ERR BITOP NOT must be called with a single source key."

func init() {
	register(&Spec{Name: "bitop", Arity: -4, FirstKey: 2, LastKey: -1, KeyStep: 1,
		Flags: []string{"write", "denyoom"}, ACL: []string{"@write", "@bitmap", "@slow"},
		Group: "bitmap", Since: "2.6.0",
		Summary: "Perform bitwise operations between strings", run: bitop})
}

// bitop is BITOP AND|OR|XOR|NOT destkey key [key ...], as Redis 7.0's
// bitopCommand: a missing source is an empty string, and a shorter
// source reads as zero bytes up to the longest one's length. The result,
// as long as the longest source, replaces destkey whatever it held (its
// TTL too); an empty result deletes destkey. The reply is the result's
// length in bytes.
func bitop(c *Cmd, ks engine.Keyspace, w *Writer) {
	op := bytes.ToLower(c.Args[1])
	switch string(op) {
	case "and", "or", "xor", "not":
	default:
		w.Error(ErrSyntax)
		return
	}
	if string(op) == "not" && len(c.Args) != 4 {
		w.Error(ErrBitopNot)
		return
	}
	srcs := make([][]byte, 0, len(c.Args)-3)
	maxLen := 0
	for _, key := range c.Args[3:] {
		e, msg := getString(ks, key)
		if msg != "" {
			w.Error(msg)
			return
		}
		var b []byte
		if e != nil {
			b = stringBytes(e)
		}
		srcs = append(srcs, b)
		maxLen = max(maxLen, len(b))
	}
	res := make([]byte, maxLen)
	for i := range res {
		var acc byte
		for j, s := range srcs {
			var v byte
			if i < len(s) {
				v = s[i]
			}
			switch {
			case j == 0:
				acc = v
			case op[0] == 'a':
				acc &= v
			case op[0] == 'o':
				acc |= v
			default: // xor
				acc ^= v
			}
		}
		if op[0] == 'n' {
			acc = ^acc
		}
		res[i] = acc
	}
	dst := c.Args[2]
	e, err := ks.Get(dst)
	if err != nil {
		w.Error(errorText(err))
		return
	}
	if maxLen == 0 {
		if e != nil {
			ks.Delete(dst)
		}
		w.Int(0)
		return
	}
	if e != nil {
		ks.Delete(dst) // Redis's setKey: any type, and the TTL, go
	}
	if e, err = ks.Create(dst, values.TypeString); err != nil {
		w.Error(errorText(err))
		return
	}
	e.Int, e.Obj = 0, &values.Str{B: res, Raw: true}
	ks.Changed(dst)
	w.Int(int64(maxLen))
}
