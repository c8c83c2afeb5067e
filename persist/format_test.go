package persist

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/engine"
)

// Named instants: t0 and steps after it, so every time in these tests is
// explicit.
const (
	t0  = int64(1_700_000_000_000_000_000) // 2023-11-14, ns
	ms  = int64(1_000_000)
	sec = 1000 * ms
)

func must(r engine.Request, err error) engine.Request {
	if err != nil {
		panic(err)
	}
	return r
}

// kindRequests returns, per state kind, requests that leave state of that
// kind on key prefix+kind, some with more than one unit.
func kindRequests(prefix string) []engine.Request {
	k := func(s string) []byte { return []byte(prefix + s) }
	return []engine.Request{
		must(engine.TokenBucket(k("gcra"), 10, 0.5, 3)),
		must(engine.Throttle(k("throttle"), 5, 2, 60*sec, 2)),
		must(engine.GCRA(k("gcra8"), 4, 3, 10, 2)),
		must(engine.Fixed(k("fixed"), 7, 60_000, 4)),
		must(engine.Sliding(k("sliding"), 9, 30_000, 5)),
		must(engine.Log(k("log"), 20, 45_000, 3)),
		must(engine.Shape(k("shape"), 6, 0.25, 2)),
	}
}

// buildState applies every kind's requests to e at a few explicit times,
// so that logs hold several timestamps and windows have both counts.
func buildState(t testing.TB, e *engine.Engine, prefix string) (now int64) {
	t.Helper()
	reqs := kindRequests(prefix)
	res := make([]engine.Result, len(reqs))
	for i, at := range []int64{t0, t0 + 250*ms, t0 + 31*sec, t0 + 32*sec} {
		if err := e.Do(context.Background(), at, reqs, res); err != nil {
			t.Fatal(err)
		}
		for j := range res {
			if res[j].Err != nil {
				t.Fatalf("step %d request %d: %v", i, j, res[j].Err)
			}
		}
		now = at
	}
	return now
}

func exportSorted(t testing.TB, e *engine.Engine, now int64) (Header, []engine.Record) {
	t.Helper()
	var recs []engine.Record
	clock, err := e.Export(context.Background(), now, func(r engine.Record) error {
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	SortRecords(recs)
	return Header{ClockNanos: clock}, recs
}

func encode(t testing.TB, h Header, recs []engine.Record) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Encode(&buf, h, recs); err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return buf.Bytes()
}

func newEngine(t testing.TB, shards int) *engine.Engine {
	e := engine.New(shards)
	t.Cleanup(e.Close)
	return e
}

// TestRoundTripEveryKind saves an engine holding every kind of state with 8
// shards and loads it into 2: the records, and every decision after, are
// the same.
func TestRoundTripEveryKind(t *testing.T) {
	src := newEngine(t, 8)
	now := buildState(t, src, "k:")
	h, recs := exportSorted(t, src, now)
	kinds := map[engine.Kind]int{}
	for _, r := range recs {
		kinds[r.Kind]++
	}
	for k := engine.KindGCRA; k <= engine.KindShape; k++ {
		if kinds[k] == 0 {
			t.Fatalf("the state has no record of kind %v: %v", k, recs)
		}
	}
	if h.ClockNanos != now {
		t.Errorf("clock %d, want %d", h.ClockNanos, now)
	}
	data := encode(t, h, recs)
	h2, recs2, err := Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if h2.ClockNanos != h.ClockNanos || h2.Meta != nil {
		t.Errorf("header %+v, want %+v", h2, h)
	}
	if !reflect.DeepEqual(recs2, recs) {
		t.Fatalf("decoded records differ:\n got %v\nwant %v", recs2, recs)
	}

	dst := newEngine(t, 2)
	if err := dst.Import(context.Background(), h2.ClockNanos, recs2); err != nil {
		t.Fatal(err)
	}
	_, again := exportSorted(t, dst, now)
	if !reflect.DeepEqual(again, recs) {
		t.Fatalf("re-exported records differ:\n got %v\nwant %v", again, recs)
	}
	// The same bytes from 2 shards as from 8.
	if data2 := encode(t, Header{ClockNanos: now}, again); !bytes.Equal(data2, data) {
		t.Errorf("the snapshot of the loaded state differs from the original (%d vs %d bytes)", len(data2), len(data))
	}
	// Every decision at later instants is the same in both engines.
	for _, at := range []int64{now, now + 10*sec, now + 40*sec, now + 5*60*sec} {
		reqs := kindRequests("k:")
		a := make([]engine.Result, len(reqs))
		b := make([]engine.Result, len(reqs))
		if err := src.Do(context.Background(), at, reqs, a); err != nil {
			t.Fatal(err)
		}
		if err := dst.Do(context.Background(), at, reqs, b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("at now+%dms: decisions differ:\n 8 shards %+v\n 2 shards %+v", (at-now)/ms, a, b)
		}
	}
}

// TestRoundTripValues: any int64 in any field, any key bytes, meta, many
// blocks, and the empty snapshot round-trip exactly.
func TestRoundTripValues(t *testing.T) {
	defer func(v int) { targetPayload = v }(targetPayload)
	targetPayload = 100 // several records per block, many blocks
	extremes := []int64{math.MinInt64, -1, 0, 1, t0, math.MaxInt64}
	var recs []engine.Record
	for i, kind := range []engine.Kind{engine.KindGCRA, engine.KindFixed, engine.KindSliding, engine.KindLog, engine.KindShape, 0, 200} {
		for j, v := range extremes {
			f := []int64{v, extremes[(j+1)%len(extremes)], -v, v ^ 0x5555}
			recs = append(recs, engine.Record{Key: fmt.Sprintf("k%02d%02d", i, j), Kind: kind, Fields: f})
		}
	}
	recs = append(recs,
		engine.Record{Key: "log-long", Kind: engine.KindLog, Fields: append([]int64{60 * sec}, longLog(1000)...)},
		engine.Record{Key: "no-fields", Kind: engine.KindGCRA, Fields: []int64{}},
		engine.Record{Key: "z\x00\xff\r\n" + strings.Repeat("é", 300), Kind: engine.KindShape, Fields: []int64{t0}},
		engine.Record{Key: "", Kind: engine.KindGCRA, Fields: []int64{t0}},
	)
	SortRecords(recs)
	for _, h := range []Header{{ClockNanos: t0}, {ClockNanos: math.MinInt64, Meta: []byte("applied=42")}, {ClockNanos: math.MaxInt64, Meta: bytes.Repeat([]byte{7}, MaxMeta)}} {
		data := encode(t, h, recs)
		h2, got, err := Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if h2.ClockNanos != h.ClockNanos || !bytes.Equal(h2.Meta, h.Meta) {
			t.Errorf("header differs: clock %d, %d bytes of meta", h2.ClockNanos, len(h2.Meta))
		}
		for i := range got {
			if len(got[i].Fields) == 0 {
				got[i].Fields = []int64{} // DeepEqual tells nil from empty
			}
		}
		if !reflect.DeepEqual(got, recs) {
			t.Fatalf("records differ:\n got %v\nwant %v", got, recs)
		}
	}
	// The empty snapshot.
	h, got, err := Decode(bytes.NewReader(encode(t, Header{ClockNanos: t0}, nil)))
	if err != nil || h.ClockNanos != t0 || len(got) != 0 {
		t.Errorf("empty snapshot: %+v, %v, %v", h, got, err)
	}
}

func longLog(n int) []int64 {
	f := make([]int64, n)
	for i := range f {
		f[i] = t0 + int64(i/3)*ms
	}
	return f
}

func TestEncoderRefuses(t *testing.T) {
	var buf bytes.Buffer
	if _, err := NewEncoder(&buf, Header{Meta: make([]byte, MaxMeta+1)}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("meta above MaxMeta: %v", err)
	}
	for _, keys := range [][]string{{"b", "a"}, {"a", "a"}, {"a", "b", "ab"}} {
		e, err := NewEncoder(&buf, Header{})
		if err != nil {
			t.Fatal(err)
		}
		var last error
		for _, k := range keys {
			last = e.Write(engine.Record{Key: k, Kind: engine.KindGCRA, Fields: []int64{1}})
		}
		if !errors.Is(last, ErrUnsorted) {
			t.Errorf("keys %q: %v, want ErrUnsorted", keys, last)
		}
	}
	e, _ := NewEncoder(&buf, Header{})
	if err := e.Write(engine.Record{Key: strings.Repeat("k", maxPayload), Kind: engine.KindGCRA, Fields: []int64{1}}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a record above the block bound: %v", err)
	}
	// A write error is returned, and sticks.
	failing := &failWriter{after: 40}
	e, err := NewEncoder(failing, Header{})
	if err != nil {
		t.Fatal(err)
	}
	e.Write(engine.Record{Key: "a", Kind: engine.KindGCRA, Fields: []int64{1}})
	if err := e.Close(); !errors.Is(err, errDiskFull) {
		t.Errorf("Close after a failed write: %v", err)
	}
}

var errDiskFull = errors.New("disk full")

type failWriter struct{ after int }

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.after {
		n := w.after
		w.after = 0
		return n, errDiskFull
	}
	w.after -= len(p)
	return len(p), nil
}

// smallSnapshot is a snapshot of every kind of state in several blocks, a
// few hundred bytes.
func smallSnapshot(t testing.TB) []byte {
	t.Helper()
	defer func(v int) { targetPayload = v }(targetPayload)
	targetPayload = 40
	e := newEngine(t, 3)
	now := buildState(t, e, "")
	h, recs := exportSorted(t, e, now)
	h.Meta = []byte("m")
	data := encode(t, h, recs)
	if n := bytes.Count(data, []byte{blockTag}); n < 3 {
		t.Fatalf("want several blocks, the file has at most %d", n)
	}
	return data
}

// TestCorruptionEveryBit flips every bit of a small snapshot, one at a
// time: each is an error, never a panic, and yields no records.
func TestCorruptionEveryBit(t *testing.T) {
	data := smallSnapshot(t)
	t.Logf("%d bytes, %d variants", len(data), 8*len(data))
	bad := make([]byte, len(data))
	for i := range data {
		for bit := range 8 {
			copy(bad, data)
			bad[i] ^= 1 << bit
			h, recs, err := Decode(bytes.NewReader(bad))
			if err == nil || recs != nil || h.ClockNanos != 0 {
				t.Fatalf("byte %d bit %d: err %v, %d records", i, bit, err, len(recs))
			}
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) {
				t.Fatalf("byte %d bit %d: %v, want ErrCorrupt or ErrTruncated", i, bit, err)
			}
		}
	}
	// Whole bytes too, and bytes appended.
	for i := range data {
		copy(bad, data)
		bad[i] ^= 0xff
		if _, _, err := Decode(bytes.NewReader(bad)); err == nil {
			t.Fatalf("byte %d inverted: no error", i)
		}
	}
	if _, _, err := Decode(bytes.NewReader(append(data[:len(data):len(data)], 0))); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a byte after the trailer: %v", err)
	}
}

// TestTruncationEveryOffset cuts a small snapshot at every length: each is
// ErrTruncated with no records.
func TestTruncationEveryOffset(t *testing.T) {
	data := smallSnapshot(t)
	for n := range len(data) {
		h, recs, err := Decode(bytes.NewReader(data[:n]))
		if !errors.Is(err, ErrTruncated) || recs != nil || h.ClockNanos != 0 {
			t.Fatalf("cut at %d of %d: err %v, %d records", n, len(data), err, len(recs))
		}
	}
	// A streaming reader gets the records of whole blocks first, then the
	// error: Decode's all-or-nothing is what loading relies on.
	d, err := NewDecoder(bytes.NewReader(data[:len(data)-1]))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		_, err := d.Next()
		if err != nil {
			if !errors.Is(err, ErrTruncated) {
				t.Errorf("Next: %v", err)
			}
			break
		}
		n++
	}
	if n == 0 {
		t.Error("no record before the truncation")
	}
}

// TestNewerVersion: a well-formed header of a later version is refused as
// such, not as damage.
func TestNewerVersion(t *testing.T) {
	data := encode(t, Header{ClockNanos: t0}, nil)
	hdrEnd := headerLen + 4
	for _, v := range []uint16{Version + 1, 0xfffe} {
		b := bytes.Clone(data)
		binary.BigEndian.PutUint16(b[8:], v)
		binary.BigEndian.PutUint16(b[10:], ^v)
		binary.BigEndian.PutUint32(b[headerLen:], crc32.Checksum(b[:headerLen], castagnoli))
		_, _, err := Decode(bytes.NewReader(b[:hdrEnd]))
		if !errors.Is(err, ErrNewerVersion) || !strings.Contains(err.Error(), fmt.Sprintf("format version %d, this build reads up to %d", v, Version)) {
			t.Errorf("version %d: %v", v, err)
		}
	}
}

func TestDecodeNotASnapshot(t *testing.T) {
	for _, s := range []string{"", "REDIS0011", strings.Repeat("\x00", 100), magic} {
		if _, _, err := Decode(strings.NewReader(s)); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) {
			t.Errorf("%q: %v", s, err)
		}
	}
}

// FuzzDecode: no input panics the decoder, and what it accepts encodes back
// to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(smallSnapshot(f))
	f.Add(encode(f, Header{ClockNanos: t0}, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, recs, err := Decode(bytes.NewReader(data))
		if err != nil {
			return
		}
		if again := encode(t, h, recs); !bytes.Equal(again, data) && len(recs) > 0 {
			// Block boundaries are the encoder's choice; the records must
			// still agree.
			_, recs2, err := Decode(bytes.NewReader(again))
			if err != nil || !reflect.DeepEqual(recs2, recs) {
				t.Fatalf("re-encoded snapshot differs: %v", err)
			}
		}
	})
}

// TestDecoderReadsAcrossShortReads: a reader that returns a byte at a time
// is fine.
func TestDecoderReadsAcrossShortReads(t *testing.T) {
	data := smallSnapshot(t)
	_, recs, err := Decode(io.LimitReader(&oneByte{data}, int64(len(data))))
	if err != nil || len(recs) == 0 {
		t.Fatalf("%v, %d records", err, len(recs))
	}
}

type oneByte struct{ b []byte }

func (r *oneByte) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = r.b[0]
	r.b = r.b[1:]
	return 1, nil
}

// TestCaptureOrder: the save's compact copy sorts exactly as SortRecords
// does, with keys that share long prefixes, are prefixes of each other,
// hold zero bytes or are empty, and gives back the same records.
func TestCaptureOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, prefix := range []string{"", "user:", "a-very-long-common-prefix-of-keys:"} {
		var recs []engine.Record
		seen := map[string]bool{}
		for i := range 3000 {
			var k string
			switch i % 4 {
			case 0:
				k = prefix + strconv.Itoa(rng.IntN(100000))
			case 1:
				k = prefix + string([]byte{byte(rng.IntN(3)), byte(rng.IntN(3))}) + strings.Repeat("\x00", rng.IntN(12))
			case 2:
				k = prefix[:rng.IntN(len(prefix)+1)]
			default:
				k = prefix + strings.Repeat("x", rng.IntN(20))
			}
			if seen[k] {
				continue
			}
			seen[k] = true
			fields := make([]int64, rng.IntN(4))
			for j := range fields {
				fields[j] = rng.Int64()
			}
			recs = append(recs, engine.Record{Key: k, Kind: engine.Kind(rng.IntN(6)), Fields: fields})
		}
		c := newCapture(sizes{})
		for _, r := range recs {
			c.add(r)
		}
		c.sort()
		SortRecords(recs)
		for i := range recs {
			got := c.record(i)
			if got.Key != recs[i].Key || got.Kind != recs[i].Kind || !slices.Equal(got.Fields, recs[i].Fields) {
				t.Fatalf("prefix %q: record %d = %q %v %v, want %q %v %v", prefix, i, got.Key, got.Kind, got.Fields, recs[i].Key, recs[i].Kind, recs[i].Fields)
			}
		}
		if want := (sizes{records: len(recs), keyBytes: len(c.keys), fields: len(c.fields)}); c.sizes() != want {
			t.Errorf("sizes %+v", c.sizes())
		}
	}
}

// Regression: prefix compression let a small block decode to gigabytes of
// key bytes (found by FuzzDecodeBlocks). Long keys sharing long prefixes
// now close blocks by decoded key bytes, and still round-trip.
func TestLongSharedKeysRoundTrip(t *testing.T) {
	base := strings.Repeat("k", MaxKeyLen-4)
	var recs []engine.Record
	for i := range 200 {
		recs = append(recs, engine.Record{Key: base + fmt.Sprintf("%04d", i), Kind: engine.KindGCRA, Fields: []int64{2e18}})
	}
	var buf bytes.Buffer
	if err := Encode(&buf, Header{ClockNanos: 1e18}, recs); err != nil {
		t.Fatal(err)
	}
	_, got, err := Decode(&buf)
	if err != nil || len(got) != len(recs) {
		t.Fatalf("decoded %d records, %v", len(got), err)
	}
	for i := range recs {
		if got[i].Key != recs[i].Key {
			t.Fatalf("record %d: key differs", i)
		}
	}
	long := []engine.Record{{Key: strings.Repeat("x", MaxKeyLen+1), Kind: engine.KindGCRA, Fields: []int64{2e18}}}
	if err := Encode(io.Discard, Header{}, long); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a key over MaxKeyLen: %v, want ErrTooLarge", err)
	}
}

// TestUnordered round-trips records in descending order under
// Header.Unordered (the Raft FSM's streamed snapshots), and checks that
// the same records are refused without it, by the encoder and, when the
// flag is cleared in the bytes, by the decoder.
func TestUnordered(t *testing.T) {
	defer func(n int) { targetPayload = n }(targetPayload)
	targetPayload = 64 // several blocks
	var recs []engine.Record
	for i := 40; i > 0; i-- {
		recs = append(recs, engine.Record{Key: fmt.Sprintf("key:%03d", i), Kind: engine.KindGCRA, Fields: []int64{int64(1e18) + int64(i)}})
	}
	var buf bytes.Buffer
	if err := Encode(&buf, Header{ClockNanos: 1e18, Unordered: true}, recs); err != nil {
		t.Fatal(err)
	}
	h, got, err := Decode(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !h.Unordered || !reflect.DeepEqual(got, recs) {
		t.Fatalf("decoded %v (unordered %v), want %v", got, h.Unordered, recs)
	}
	if err := Encode(io.Discard, Header{ClockNanos: 1e18}, recs); !errors.Is(err, ErrUnsorted) {
		t.Fatalf("ordered Encode of descending keys: %v, want ErrUnsorted", err)
	}
	// Clear the flag and fix the header's CRC: the reader then checks the
	// order, and refuses.
	b := bytes.Clone(buf.Bytes())
	b[len(magic)+7] = 0
	binary.BigEndian.PutUint32(b[headerLen:], crc32.Checksum(b[:headerLen], castagnoli))
	if _, _, err := Decode(bytes.NewReader(b)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "not above") {
		t.Fatalf("descending keys without the flag: %v, want ErrCorrupt", err)
	}
}
