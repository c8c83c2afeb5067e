package engine

import "testing"

// TestLogRingStaysWithinLimit checks the sliding log's memory bound from
// the inside: the ring never holds more slots than the limit, wraps
// correctly, and shrinks once most entries have left.
func TestLogRingStaysWithinLimit(t *testing.T) {
	const t0 = int64(1_700_000_000_000_000_000)
	const ms = int64(1_000_000)
	var st logState
	r := &Request{Op: OpLog, Limit: 100, Window: 1000 * ms}
	now := t0
	admitted := 0
	for i := range 5000 {
		now += int64(i%7) * ms
		r.Cost = int64(1 + i%5)
		var out Result
		if slidingLog(now, &st, r, &out) {
			admitted++
		}
		if len(st.ring) > int(r.Limit) || int(st.n) > len(st.ring) {
			t.Fatalf("step %d: ring %d slots for %d entries, limit %d", i, len(st.ring), st.n, r.Limit)
		}
		for j := uint32(1); j < st.n; j++ {
			if st.at(j) < st.at(j-1) {
				t.Fatalf("step %d: entries out of order", i)
			}
		}
	}
	if admitted == 0 || len(st.ring) < 64 {
		t.Fatalf("admitted %d, ring %d: the trace did not fill the log", admitted, len(st.ring))
	}
	// After a quiet spell, a single call shrinks the ring.
	now += 10 * 1000 * ms
	r.Cost = 1
	var out Result
	slidingLog(now, &st, r, &out)
	if !out.Allowed || st.n != 1 || len(st.ring) > 4 {
		t.Fatalf("after the window passed: %d entries in %d slots", st.n, len(st.ring))
	}
}
