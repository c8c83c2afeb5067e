package engine

// A sliding window log keeps, per key, the time of every admitted unit
// still inside the window: a call of cost c adds c copies of now. At now
// the window is (now-W, now], so an entry at t counts while t > now-W. A
// call of cost c is allowed iff entries + c <= limit.
//
// Guarantee (exact): for a key used with one limit L and window W, never
// more than L units admitted in any window [s, s+W) of W ns. (The last
// admission in such a window, at t, saw every earlier one in it, since
// they all lie in (t-W, t].)
//
// Memory: one int64 per unit in the window, so at most limit entries; the
// ring grows by doubling up to what the calls need (never beyond the
// limit) and shrinks when it is mostly empty. MaxLogLimit bounds a key at
// 800 KB. One entry per unit (rather than time and count pairs) makes
// RetryAfter O(1): the entry that must leave is found by its index.
//
// Result: Allowed, Limit, Remaining (limit - entries, after this call when
// allowed, never below 0), RetryAfter (0 when allowed; -1 when cost >
// limit; otherwise exact: entries + c - limit entries must leave, so the
// ns until the youngest of them, the k-th oldest, leaves), ResetAfter (ns
// until the newest entry leaves, 0 when empty).
//
// State: the window length and the ring. It expires when the newest entry
// leaves. Entries that left are dropped on access, which is invisible.
//
// Changed parameters (a policy changed at run time, or two callers that
// disagree): the timestamps are kept and re-read under the call's limit and
// window. A call with window W' first drops the entries outside the stored
// window W (they are gone whatever W' is: a longer window does not bring
// them back, since they may have been dropped already), then counts the
// entries inside its own window, those at t > now-W'. When it writes, the
// log's window becomes W' and entries outside it are dropped. A lowered
// limit leaves the entries in place and denies until enough have left; a
// raised one admits at once.

// logState is a key's sliding window log: n timestamps in ascending order
// starting at ring[head], wrapping around.
type logState struct {
	ring   []int64
	head   uint32
	n      uint32
	window int64 // window length in ns
}

// at is the i-th oldest timestamp, 0 <= i < n.
func (st *logState) at(i uint32) int64 {
	j := st.head + i
	if c := uint32(len(st.ring)); j >= c {
		j -= c
	}
	return st.ring[j]
}

func (st *logState) expiresAt() int64 {
	if st.n == 0 {
		return 0
	}
	return st.at(st.n-1) + st.window
}

// evict drops the entries that are outside the window at now.
func (st *logState) evict(now int64) {
	for st.n > 0 && st.ring[st.head] <= now-st.window {
		st.head++
		if st.head == uint32(len(st.ring)) {
			st.head = 0
		}
		st.n--
	}
}

// push appends c copies of now (n+c <= limit <= MaxLogLimit), resizing the
// ring when it is too small or mostly empty.
func (st *logState) push(now, c, limit int64) {
	need := int64(st.n) + c
	size := int64(len(st.ring))
	if need > size || (size > 16 && need <= size/4) {
		st.resize(min(max(2*need, 4), max(limit, need)))
	}
	j := st.head + st.n
	size32 := uint32(len(st.ring))
	if j >= size32 {
		j -= size32
	}
	for range c {
		st.ring[j] = now
		j++
		if j == size32 {
			j = 0
		}
	}
	st.n += uint32(c)
}

func (st *logState) resize(size int64) {
	ring := make([]int64, size)
	for i := range st.n {
		ring[i] = st.at(i)
	}
	st.ring = ring
	st.head = 0
}

// Log builds an RL.LOG request: at most limit units in any window of
// windowMs milliseconds, taking cost units. Cost 0 is a read-only peek.
// Limits above MaxLogLimit are ErrLogLimitTooLarge.
func Log(key []byte, limit, windowMs, cost int64) (Request, error) {
	window, err := windowParams(limit, windowMs, cost, MaxLogLimit, ErrLogLimitTooLarge)
	if err != nil {
		return Request{}, err
	}
	return Request{Op: OpLog, ReadOnly: cost == 0, Key: key, Limit: limit, Window: window, Cost: cost}, nil
}

// slidingLog decides one sliding window log request and updates st in
// place (st is the zero value for a missing key). It reports whether st
// was written and is to be kept.
func slidingLog(now int64, st *logState, r *Request, out *Result) (store bool) {
	w, limit, cost := r.Window, r.Limit, r.Cost
	st.evict(now) // under the stored window
	// The entries before skip are inside the stored window but not the
	// call's (a shortened window).
	var skip uint32
	if w < st.window {
		skip = st.firstAfter(now - w)
	}
	n := int64(st.n - skip)
	out.Limit = limit
	out.Remaining = max(limit-n, 0)
	if n > 0 {
		out.ResetAfter = st.at(st.n-1) + w - now
	}
	if cost > limit {
		out.RetryAfter = -1
		return false
	}
	if n+cost > limit {
		k := uint32(n + cost - limit) // 1 <= k <= n
		out.RetryAfter = st.at(skip+k-1) + w - now
		return false
	}
	out.Allowed = true
	out.Remaining = limit - n - cost
	if n+cost > 0 {
		out.ResetAfter = w
		if cost == 0 {
			out.ResetAfter = st.at(st.n-1) + w - now
		}
	}
	if r.ReadOnly || cost == 0 {
		return false
	}
	if st.window != w {
		st.window = w
		st.evict(now) // drops the skipped entries
	}
	st.push(now, cost, limit)
	return true
}

// firstAfter is the index of the oldest entry above t (n when none is):
// a binary search, since the entries are ascending.
func (st *logState) firstAfter(t int64) uint32 {
	lo, hi := uint32(0), st.n
	for lo < hi {
		mid := lo + (hi-lo)/2
		if st.at(mid) <= t {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}
