package persist

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"
)

var testPolicies = [][]string{
	{"api", "FIXED", "100", "60000"},
	{"login", "ALLOW", "5", "0.1"},
	{"upload", "THROTTLE", "9", "10", "60"},
}

// TestPoliciesRoundTrip: the policies come back with the records; a
// snapshot without policies is version 1, as before.
func TestPoliciesRoundTrip(t *testing.T) {
	e := newEngine(t, 2)
	now := buildState(t, e, "")
	h, recs := exportSorted(t, e, now)
	plain := encode(t, h, recs)
	if v := binary.BigEndian.Uint16(plain[len(magic):]); v != 1 {
		t.Errorf("a snapshot without policies is version %d, want 1", v)
	}
	h.Policies = testPolicies
	h.Meta = []byte("meta")
	data := encode(t, h, recs)
	if v := binary.BigEndian.Uint16(data[len(magic):]); v != 2 {
		t.Errorf("a snapshot with policies is version %d, want 2", v)
	}
	h2, recs2, err := Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(h2.Policies, testPolicies) || string(h2.Meta) != "meta" || h2.ClockNanos != h.ClockNanos {
		t.Errorf("header %+v", h2)
	}
	if !reflect.DeepEqual(recs2, recs) {
		t.Errorf("records differ after the round trip")
	}
	// A version 2 file without the section (as a build that writes v2
	// may) reads as no policies.
	h.Policies = nil
	d, err := NewDecoder(bytes.NewReader(plain))
	if err != nil || d.Header().Policies != nil {
		t.Errorf("version 1: %v %v", d.Header().Policies, err)
	}
}

// TestPoliciesCorruptionEveryBit flips every bit of a small snapshot with
// policies, and cuts it at every length: each is an error, never a panic.
func TestPoliciesCorruptionEveryBit(t *testing.T) {
	h := Header{ClockNanos: t0, Policies: testPolicies}
	data := encode(t, h, nil)
	bad := make([]byte, len(data))
	for i := range data {
		for bit := range 8 {
			copy(bad, data)
			bad[i] ^= 1 << bit
			h2, _, err := Decode(bytes.NewReader(bad))
			if err == nil || h2.Policies != nil {
				t.Fatalf("byte %d bit %d: err %v, policies %v", i, bit, err, h2.Policies)
			}
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrNewerVersion) {
				t.Fatalf("byte %d bit %d: %v", i, bit, err)
			}
		}
	}
	for n := range len(data) {
		if _, _, err := Decode(bytes.NewReader(data[:n])); !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d: %v", n, err)
		}
	}
}

func TestPoliciesEncoderRefuses(t *testing.T) {
	for _, defs := range [][][]string{
		{{"only-a-name"}},
		{make([]string, maxPolicyWords+1)},
		{{"a", string(make([]byte, maxPolicyWord+1))}},
	} {
		if _, err := NewEncoder(&bytes.Buffer{}, Header{Policies: defs}); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%d words: %v", len(defs[0]), err)
		}
	}
}

type fakePolicies struct {
	defs    atomic.Pointer[[][]string]
	changes atomic.Uint64
}

func (f *fakePolicies) Defs() [][]string { return *f.defs.Load() }
func (f *fakePolicies) Changes() uint64  { return f.changes.Load() }

// TestSaverSavesPolicies: saves hold the policies, and a policy change
// alone is a change to save; Load hands them back.
func TestSaverSavesPolicies(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, dir)
	e := newEngine(t, 2)
	sv := NewSaver(store, e, 0, nil)
	sv.now = func() int64 { return t0 }
	pols := &fakePolicies{}
	pols.defs.Store(&testPolicies)
	pols.changes.Store(5)
	sv.SetPolicies(pols)
	if st := sv.Status(); st.Changes != 0 {
		t.Errorf("changes right after SetPolicies: %d", st.Changes)
	}
	pols.changes.Add(1)
	if st := sv.Status(); st.Changes != 1 {
		t.Errorf("a policy change is not a change: %+v", st)
	}
	if err := sv.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, err := openStore(t, dir).Load(context.Background(), newEngine(t, 1), t0)
	if err != nil || !st.Found {
		t.Fatal(st, err)
	}
	if !reflect.DeepEqual(st.Policies, testPolicies) {
		t.Errorf("loaded policies %v", st.Policies)
	}
}
