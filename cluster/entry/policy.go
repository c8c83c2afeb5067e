package entry

import (
	"encoding/binary"
	"fmt"

	"github.com/rlserver/rlserver/cluster/internal/codec"
	"github.com/rlserver/rlserver/policy"
)

// Policy entries. Policies are replicated state: RL.POLICY SET, DEL and
// LOAD are PolicySet, PolicyDel and PolicyReplace entries that every
// replica applies to its policy.Store, so a policy change is in force
// for every check applied after it, on every replica. A definition is its
// words: a uvarint count, then each as a length-prefixed string.

// AppendWords encodes a policy definition's words.
func AppendWords(dst []byte, words []string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(words)))
	for _, w := range words {
		dst = codec.AppendString(dst, w)
	}
	return dst
}

func readWords(d *codec.Reader) []string {
	n := d.Uvarint()
	if d.Err != nil || n > 64 || n > uint64(len(d.B)) {
		d.Fail()
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = string(d.Bytes())
	}
	return out
}

// AppendPolicy encodes a policy entry's type and payload, without its
// time (what a follower forwards): PolicySet carries defs[0], PolicyDel
// the name defs[0][0], PolicyReplace every definition.
func AppendPolicy(typ byte, defs [][]string) []byte {
	b := []byte{typ}
	switch typ {
	case PolicySet:
		b = AppendWords(b, defs[0])
	case PolicyDel:
		b = codec.AppendString(b, defs[0][0])
	case PolicyReplace:
		b = binary.AppendUvarint(b, uint64(len(defs)))
		for _, d := range defs {
			b = AppendWords(b, d)
		}
	}
	return b
}

// DecodePolicy decodes AppendPolicy's encoding: the entry type and its
// definitions, as Decoded.Defs holds them. A policy entry must hold
// definitions that parse: the state machine panics on one that does not.
func DecodePolicy(body []byte) (typ byte, defs [][]string, err error) {
	if len(body) == 0 {
		return 0, nil, ErrCorrupt
	}
	switch body[0] {
	case PolicySet, PolicyDel, PolicyReplace:
	default:
		return 0, nil, ErrCorrupt
	}
	defs, err = decodePolicy(body[0], body[1:])
	return body[0], defs, err
}

// decodePolicy decodes the payload of a policy entry of type typ.
func decodePolicy(typ byte, b []byte) ([][]string, error) {
	d := codec.Reader{B: b}
	switch typ {
	case PolicySet:
		def := readWords(&d)
		if d.Err != nil || len(d.B) != 0 {
			return nil, ErrCorrupt
		}
		if _, err := policy.Parse(def); err != nil {
			return nil, fmt.Errorf("%w: policy %q: %v", ErrCorrupt, def, err)
		}
		return [][]string{def}, nil
	case PolicyDel:
		name := d.Bytes()
		if d.Err != nil || len(d.B) != 0 {
			return nil, ErrCorrupt
		}
		return [][]string{{string(name)}}, nil
	case PolicyReplace:
		n := d.Uvarint()
		if d.Err != nil || n > policy.MaxPolicies || n > uint64(len(d.B)) {
			return nil, ErrCorrupt
		}
		defs := make([][]string, n)
		for i := range defs {
			defs[i] = readWords(&d)
		}
		if d.Err != nil || len(d.B) != 0 {
			return nil, ErrCorrupt
		}
		if _, err := policy.ParseDefs(defs); err != nil {
			return nil, fmt.Errorf("%w: policies: %v", ErrCorrupt, err)
		}
		return defs, nil
	}
	return nil, ErrCorrupt
}
