package persist

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// PolicySource supplies the policies a Saver writes: *policy.Store.
type PolicySource interface {
	// Defs returns every policy's words, sorted by name.
	Defs() [][]string
	// Changes counts the changes so far; equal counts mean nothing changed.
	Changes() uint64
}

// SetPolicies makes every save from now on hold p's policies, and a
// change to them alone a reason to save.
func (s *Saver) SetPolicies(p PolicySource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pols.Store(&polsBox{p})
	s.savedAt += p.Changes()
}

type polsBox struct{ p PolicySource }

func (s *Saver) policySource() PolicySource {
	if b := s.pols.Load(); b != nil {
		return b.p
	}
	return nil
}

// changes counts the writes to the state and to the policies.
func (s *Saver) changes() uint64 {
	n := s.src.Changes()
	if p := s.policySource(); p != nil {
		n += p.Changes()
	}
	return n
}

// The policies section (format version 2): the named rate-limit policies
// in force when the snapshot was taken (RL.POLICY, package policy). It
// sits between the header and the first block:
//
//	policies tag      'P'
//	         count    uint32   definitions, at most maxPolicyDefs
//	         length   uint32   payload bytes, at most maxPayload
//	         payload  count definitions: uvarint words (2..maxPolicyWords),
//	                  then each word as uvarint length (at most maxPolicyWord) and bytes
//	         crc      uint32   CRC of tag, count, length and payload
//
// A definition is a policy's words as RL.POLICY GET gives them (name,
// KIND, params); this package keeps them as they are, the policy package
// parses them. The section is optional: the encoder writes version 1,
// byte for byte as before, when there are no policies, so older builds
// keep reading those snapshots; a version 2 snapshot has at most one
// policies section, and none means no policies.

const (
	policyTag      = 'P'
	maxPolicyDefs  = 1 << 20
	maxPolicyWords = 16
	maxPolicyWord  = 4096
	policyHead     = 1 + 4 + 4 // tag, count, length
)

// policiesVersion is the first format version with a policies section.
const policiesVersion = 2

// versionFor is the format version a snapshot with header h is written in.
func versionFor(h Header) uint16 {
	if len(h.Policies) > 0 {
		return policiesVersion
	}
	return 1
}

// appendPolicies encodes the policies section of defs.
func appendPolicies(dst []byte, defs [][]string) ([]byte, error) {
	if len(defs) > maxPolicyDefs {
		return nil, fmt.Errorf("%w: %d policies", ErrTooLarge, len(defs))
	}
	start := len(dst)
	dst = append(dst, policyTag)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(defs)))
	dst = binary.BigEndian.AppendUint32(dst, 0) // length, set below
	for _, d := range defs {
		if len(d) < 2 || len(d) > maxPolicyWords {
			return nil, fmt.Errorf("%w: a policy of %d words", ErrTooLarge, len(d))
		}
		dst = binary.AppendUvarint(dst, uint64(len(d)))
		for _, w := range d {
			if len(w) > maxPolicyWord {
				return nil, fmt.Errorf("%w: a policy word of %d bytes", ErrTooLarge, len(w))
			}
			dst = binary.AppendUvarint(dst, uint64(len(w)))
			dst = append(dst, w...)
		}
	}
	length := len(dst) - start - policyHead
	if length > maxPayload {
		return nil, fmt.Errorf("%w: policies of %d bytes", ErrTooLarge, length)
	}
	binary.BigEndian.PutUint32(dst[start+5:], uint32(length))
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli)), nil
}

// readPolicies reads the policies section if the stream continues with
// one (its tag not yet consumed).
func (d *Decoder) readPolicies() error {
	if b, err := d.r.Peek(1); err != nil || b[0] != policyTag {
		return nil // blocks, the trailer, or an end that nextBlock reports
	}
	at := d.off
	var head [policyHead]byte
	if err := d.read(head[:], "policies header"); err != nil {
		return err
	}
	count := binary.BigEndian.Uint32(head[1:])
	length := binary.BigEndian.Uint32(head[5:])
	if length > maxPayload || count > maxPolicyDefs || uint64(count)*3 > uint64(length) {
		return fmt.Errorf("%w: policies at byte %d: bad count %d or length %d", ErrCorrupt, at, count, length)
	}
	buf := make([]byte, int(length)+4)
	if err := d.read(buf, fmt.Sprintf("policies at byte %d", at)); err != nil {
		return err
	}
	sum := crc32.Update(crc32.Checksum(head[:], castagnoli), castagnoli, buf[:length])
	if binary.BigEndian.Uint32(buf[length:]) != sum {
		return fmt.Errorf("%w: policies at byte %d: checksum mismatch", ErrCorrupt, at)
	}
	p := buf[:length]
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(p)
		if n <= 0 {
			return 0, false
		}
		p = p[n:]
		return v, true
	}
	defs := make([][]string, count)
	for i := range defs {
		n, ok := uv()
		if !ok || n < 2 || n > maxPolicyWords {
			return fmt.Errorf("%w: policies at byte %d: definition %d: bad word count", ErrCorrupt, at, i)
		}
		def := make([]string, n)
		for j := range def {
			l, ok := uv()
			if !ok || l > maxPolicyWord || l > uint64(len(p)) {
				return fmt.Errorf("%w: policies at byte %d: definition %d: bad word", ErrCorrupt, at, i)
			}
			def[j] = string(p[:l])
			p = p[l:]
		}
		defs[i] = def
	}
	if len(p) != 0 {
		return fmt.Errorf("%w: policies at byte %d: %d bytes after the last definition", ErrCorrupt, at, len(p))
	}
	d.h.Policies = defs
	return nil
}
