package codec

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/rlserver/rlserver/engine"
)

// TestRoundTrip: every primitive reads back what was appended, in order.
func TestRoundTrip(t *testing.T) {
	recs := []engine.Record{{Key: "a", Kind: 1, Fields: []int64{-1, 1 << 40}}, {Key: "", Kind: 2}}
	b := AppendString(nil, "node-a")
	b = binary.AppendUvarint(b, 300)
	b = binary.AppendVarint(b, -7)
	b = append(b, 9)
	b = binary.AppendUvarint(b, uint64(len(recs)))
	for i := range recs {
		b = AppendRecord(b, &recs[i])
	}
	r := Reader{B: b}
	s, u, v, c, got := string(r.Bytes()), r.Uvarint(), r.Varint(), r.Byte(), r.Records()
	if r.Err != nil || len(r.B) != 0 || s != "node-a" || u != 300 || v != -7 || c != 9 {
		t.Fatalf("read %q %d %d %d, err %v, %d bytes left", s, u, v, c, r.Err, len(r.B))
	}
	for i := range got {
		if got[i].Fields == nil {
			got[i].Fields = []int64{}
		}
		if recs[i].Fields == nil {
			recs[i].Fields = []int64{}
		}
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatalf("records %+v, want %+v", got, recs)
	}
}

// TestErrorSticks: a read past the input is ErrCorrupt, and every later
// read returns zero values without panicking.
func TestErrorSticks(t *testing.T) {
	r := Reader{B: AppendString(nil, "abc")[:2]}
	if b := r.Bytes(); b != nil || !errors.Is(r.Err, ErrCorrupt) {
		t.Fatalf("truncated string: %q, %v", b, r.Err)
	}
	if r.Byte() != 0 || r.Uvarint() != 0 || r.Varint() != 0 || r.Records() != nil || r.Err != ErrCorrupt {
		t.Fatal("a read after the error returned a value")
	}
	huge := Reader{B: binary.AppendUvarint(nil, 1<<40)}
	if huge.Records() != nil || huge.Err == nil {
		t.Fatal("a record count beyond the input was accepted")
	}
}

// TestRecordsLargeValue: a record of a million fields (a string of 8 MiB,
// the value bound) reads back whole, as a slot move's chunk carries it;
// a count of fields past the bytes left is refused.
func TestRecordsLargeValue(t *testing.T) {
	big := engine.Record{Key: "big", Kind: 9, Fields: make([]int64, 1<<20+3)}
	for i := range big.Fields {
		big.Fields[i] = int64(i) * 0x0101010101
	}
	b := AppendRecord(binary.AppendUvarint(nil, 1), &big)
	r := Reader{B: b}
	got := r.Records()
	if r.Err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], big) {
		t.Fatalf("a record of %d fields: err %v, %d records read", len(big.Fields), r.Err, len(got))
	}
	bad := AppendString(binary.AppendUvarint(nil, 1), "k")
	bad = binary.AppendUvarint(append(bad, 1), 1000) // 1000 fields announced, 2 bytes follow
	bad = append(bad, 0, 0)
	r = Reader{B: bad}
	if r.Records(); r.Err == nil {
		t.Fatal("a field count past the bytes left was read")
	}
}
