package entry

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/rlserver/rlserver/engine"
)

// appendRequestV1 encodes r in the first request encoding (batchV1
// entries), which nothing writes any more: the tests build old entries
// with it.
func appendRequestV1(dst []byte, r *engine.Request) []byte {
	var flags byte
	if r.ReadOnly {
		flags |= flagReadOnly
	}
	dst = append(dst, byte(r.Op), flags)
	dst = binary.AppendUvarint(dst, uint64(len(r.Key)))
	dst = append(dst, r.Key...)
	dst = binary.AppendVarint(dst, r.Interval)
	dst = binary.AppendVarint(dst, r.Limit)
	dst = binary.AppendVarint(dst, r.Window)
	return binary.AppendVarint(dst, r.Cost)
}

// fillFields sets every field of the struct v points to a distinct non-zero
// value, and fails on a field type it does not know, so that a new field of
// a new type is noticed too.
func fillFields(t *testing.T, v reflect.Value, rng *rand.Rand) {
	t.Helper()
	v = v.Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		name := v.Type().Field(i).Name
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Uint8, reflect.Uint16:
			f.SetUint(uint64(1 + rng.IntN(200)))
		case reflect.Int64:
			x := rng.Int64()
			if rng.IntN(2) == 0 {
				x = -x
			}
			f.SetInt(x)
		case reflect.Slice:
			if f.Type().Elem().Kind() != reflect.Uint8 {
				t.Fatalf("field %s: unhandled slice type %s", name, f.Type())
			}
			b := make([]byte, 1+rng.IntN(40))
			for j := range b {
				b[j] = byte(rng.IntN(256))
			}
			f.SetBytes(b)
		case reflect.String:
			b := make([]byte, 1+rng.IntN(40))
			for j := range b {
				b[j] = byte(rng.IntN(256))
			}
			f.SetString(string(b))
		case reflect.Interface:
			// Result.Err: set separately; Request.Cmd: OpCmd only.
		default:
			t.Fatalf("field %s: unhandled kind %s: teach the encoding (and this test) about it", name, f.Kind())
		}
	}
}

func abs64(x int64) int64 {
	if x < 0 {
		if x == -x { // MinInt64
			return 0
		}
		return -x
	}
	return x
}

// TestRequestEncodingCarriesEveryField fails when engine.Request gains a
// field the log entry encoding does not carry: every field is set to a
// non-zero value and must survive the round trip. A new field needs a new
// entry type and an update of the list below.
func TestRequestEncodingCarriesEveryField(t *testing.T) {
	// Cmd travels in OpCmd requests only, as the command's own encoding
	// (kv.Append): cluster's kv_entry_test.go round-trips those.
	want := []string{"Cmd", "Cost", "Interval", "Key", "Limit", "Op", "ReadOnly", "Scaled", "Tiers", "Window"} // sorted
	var got []string
	rt := reflect.TypeOf(engine.Request{})
	for i := range rt.NumField() {
		got = append(got, rt.Field(i).Name)
	}
	slices.Sort(got)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("engine.Request fields are %v; the log encoding carries %v: extend AppendRequest/readRequest and add an entry type", got, want)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var reqs []engine.Request
		for range 1 + rng.IntN(5) {
			var r engine.Request
			fillFields(t, reflect.ValueOf(&r), rng)
			r.ReadOnly = rng.IntN(2) == 0
			// Keep every field non-zero but within engine.Validate's bounds:
			// the decoder refuses requests no constructor builds.
			r.Op = engine.OpFixed
			r.Limit = 1 + abs64(r.Limit)%engine.MaxLimit
			r.Window = 1 + abs64(r.Window)%engine.MaxDuration
			r.Cost = abs64(r.Cost)
			r.Tiers = 0
			reqs = append(reqs, r)
		}
		// One all-or-nothing group of them all (Batch carries Tiers and
		// Scaled; batchV1, which cannot, is only read).
		reqs[0].Tiers = uint16(len(reqs))
		buf := AppendHeader(nil, Batch, rng.Int64())
		buf = binary.AppendUvarint(buf, uint64(len(reqs)))
		buf = AppendRequests(buf, reqs, nil)
		e, err := Decode(buf)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(e.Reqs, reqs) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", e.Reqs, reqs)
		}
	}
}

// TestDecodeRejectsCorrupt: every truncation, an unknown type, trailing
// bytes and a count that cannot fit are refused.
func TestDecodeRejectsCorrupt(t *testing.T) {
	r, _ := engine.TokenBucket([]byte("k"), 10, 1, 1)
	good := AppendHeader(nil, batchV1, 5)
	good = binary.AppendUvarint(good, 1)
	good = appendRequestV1(good, &r)
	if _, err := Decode(good); err != nil {
		t.Fatal(err)
	}
	for i := range len(good) {
		if _, err := Decode(good[:i]); err == nil {
			t.Fatalf("truncated to %d bytes: decoded", i)
		}
	}
	cases := map[string][]byte{
		"empty":         nil,
		"unknown type":  append([]byte{99}, good[1:]...),
		"trailing":      append(bytes.Clone(good), 0),
		"huge count":    append(AppendHeader(nil, batchV1, 5), 0xff, 0xff, 0xff, 0xff, 0x0f),
		"flush payload": append(AppendHeader(nil, Flush, 5), 1),
	}
	for name, b := range cases {
		if _, err := Decode(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// TestBatchV1DecodesAsBatch: a batch in the first request encoding, as
// old logs hold it, decodes as a Batch (marked V1) whose requests are the
// ones written.
func TestBatchV1DecodesAsBatch(t *testing.T) {
	r, _ := engine.TokenBucket([]byte("k"), 10, 1, 1)
	ro := r
	ro.ReadOnly, ro.Cost = true, 0
	b := AppendHeader(nil, batchV1, 7)
	b = binary.AppendUvarint(b, 2)
	b = appendRequestV1(appendRequestV1(b, &r), &ro)
	e, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if e.Type != Batch || !e.V1 || e.NowNanos != 7 || e.Names != nil || !reflect.DeepEqual(e.Reqs, []engine.Request{r, ro}) {
		t.Fatalf("decoded %+v", e)
	}
	// Wrapped in NoCreate, as a leader above maxmemory wrote it.
	if e, err := Decode(append([]byte{NoCreate}, b...)); err != nil || !e.NoCreate || e.Type != Batch {
		t.Fatalf("wrapped: %+v, %v", e, err)
	}
}
