package clienttest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// Pipelines and concurrency: replies in order with exact values, and
// atomic decisions when many connections share one key.

// pipelined is the expected reply to command i of a pipeline that cycles
// over keys keys of capacity capacity: the key's n-th call.
func pipelined(i, keys int, capacity int64) (key string, want decision) {
	n := int64(i/keys + 1)
	if n <= capacity {
		return fmt.Sprintf("k%d", i%keys), allowedAt(capacity, n)
	}
	return fmt.Sprintf("k%d", i%keys), deniedFull(capacity)
}

func TestPipeline10000(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	ctx := context.Background()
	const n, keys, capacity = 10000, 100, 50

	for _, proto := range []int{3, 2} {
		c := newGoRedis(t, s, &redis.Options{Protocol: proto})
		prefix := "p" + strconv.Itoa(proto)
		pipe := c.Pipeline()
		cmds := make([]*redis.Cmd, n)
		for i := range cmds {
			key, _ := pipelined(i, keys, capacity)
			cmds[i] = pipe.Do(ctx, "RL.ALLOW", prefix+key, capacity, slowRate)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("RESP%d: pipeline: %v", proto, err)
		}
		bad := 0
		for i, cmd := range cmds {
			_, want := pipelined(i, keys, capacity)
			got, err := cmd.Int64Slice()
			if (err != nil || !want.match(got)) && bad < 10 {
				bad++
				t.Errorf("RESP%d: command %d = %v, %v; want %v", proto, i, got, err, want)
			}
		}
	}

	// A mixed pipeline: limiter commands, errors and other commands in one
	// stream; every reply in its place.
	c := newGoRedis(t, s, nil)
	pipe := c.Pipeline()
	cmds := make([]*redis.Cmd, n)
	for i := 0; i < n; i += 5 {
		key := fmt.Sprintf("m%d", (i/5)%40)
		cmds[i] = pipe.Do(ctx, "RL.ALLOW", key, 100, slowRate)
		cmds[i+1] = pipe.Do(ctx, "ECHO", strconv.Itoa(i))
		cmds[i+2] = pipe.Do(ctx, "RL.PEEK", key, 100, slowRate)
		cmds[i+3] = pipe.Do(ctx, "EXISTS", key, key, "nosuch")
		cmds[i+4] = pipe.Do(ctx, "RL.ALLOW", key, 100, "-1")
	}
	pipe.Exec(ctx) // errors are checked per command
	bad := 0
	fail := func(i int, format string, args ...any) {
		if bad++; bad <= 10 {
			t.Errorf("mixed command %d: "+format, append([]any{i}, args...)...)
		}
	}
	for i := 0; i < n; i += 5 {
		nth := int64(i/5/40 + 1)
		if got, err := cmds[i].Int64Slice(); err != nil || !allowedAt(100, nth).match(got) {
			fail(i, "RL.ALLOW = %v, %v; want %v", got, err, allowedAt(100, nth))
		}
		if got, err := cmds[i+1].Text(); err != nil || got != strconv.Itoa(i) {
			fail(i+1, "ECHO = %q, %v", got, err)
		}
		if got, err := cmds[i+2].Int64Slice(); err != nil || !allowedAt(100, nth+1).match(got) {
			fail(i+2, "RL.PEEK = %v, %v; want %v", got, err, allowedAt(100, nth+1))
		}
		if got, err := cmds[i+3].Int64(); err != nil || got != 2 {
			fail(i+3, "EXISTS = %d, %v", got, err)
		}
		if err := cmds[i+4].Err(); err == nil || err.Error() != "ERR rate must be a finite number > 0" {
			fail(i+4, "RL.ALLOW with a negative rate: %v", err)
		}
	}

	// rueidis: one DoMulti of 10,000.
	r := newRueidis(t, s, rueidis.ClientOption{DisableCache: true})
	multi := make(rueidis.Commands, n)
	for i := range multi {
		key, _ := pipelined(i, keys, capacity)
		multi[i] = r.B().Arbitrary("RL.ALLOW").Keys("r"+key).Args(strconv.Itoa(capacity), slowRate).Build()
	}
	bad = 0
	for i, res := range r.DoMulti(ctx, multi...) {
		_, want := pipelined(i, keys, capacity)
		got, err := res.AsIntSlice()
		if (err != nil || !want.match(got)) && bad < 10 {
			bad++
			t.Errorf("rueidis: command %d = %v, %v; want %v", i, got, err, want)
		}
	}
	wantInt(t, c, 2*keys+40+keys, "DBSIZE")
}

// hammer is the outcome of many clients calling RL.ALLOW on one key.
type hammer struct {
	mu        sync.Mutex
	allowed   map[int64]int // remaining -> times seen
	denied    int
	unexpects []string
}

func (h *hammer) record(got []int64, err error, capacity int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err != nil:
		h.unexpects = append(h.unexpects, err.Error())
	case len(got) == 4 && got[0] == 1 && got[2] == 0 && aged((capacity-got[1])*periodMs).has(got[3]):
		h.allowed[got[1]]++
	case deniedFull(capacity).match(got):
		h.denied++
	default:
		h.unexpects = append(h.unexpects, fmt.Sprint(got))
	}
}

// check verifies that exactly capacity calls were allowed, one for each
// remaining count capacity-1 .. 0, and every other call was denied.
func (h *hammer) check(t *testing.T, capacity int64, total int) {
	t.Helper()
	if len(h.unexpects) > 0 {
		t.Errorf("%d unexpected replies, first %q", len(h.unexpects), h.unexpects[0])
	}
	n := 0
	for r, times := range h.allowed {
		n += times
		if r < 0 || r >= capacity || times != 1 {
			t.Errorf("remaining %d was reported %d times", r, times)
		}
	}
	if int64(n) != capacity || n+h.denied != total {
		t.Errorf("%d allowed and %d denied of %d calls; want exactly %d allowed", n, h.denied, total, capacity)
	}
}

const (
	hammerConns    = 50
	hammerCapacity = 1000
	hammerSingles  = 20 // single commands per connection
	hammerBatch    = 20 // then one pipeline of this many
	hammerTotal    = hammerConns * (hammerSingles + hammerBatch)
)

func TestConcurrentGoRedis(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	ctx := context.Background()
	clients := make([]*redis.Client, hammerConns)
	for i := range clients {
		clients[i] = newGoRedis(t, s, &redis.Options{PoolSize: 1, MinIdleConns: 1})
		if err := clients[i].Ping(ctx).Err(); err != nil {
			t.Fatalf("PING: %v", err)
		}
	}
	h := &hammer{allowed: map[int64]int{}}
	var wg sync.WaitGroup
	startGate := make(chan struct{})
	for _, c := range clients {
		wg.Go(func() {
			<-startGate
			for range hammerSingles {
				got, err := c.Do(ctx, "RL.ALLOW", "hot", hammerCapacity, slowRate).Int64Slice()
				h.record(got, err, hammerCapacity)
			}
			pipe := c.Pipeline()
			cmds := make([]*redis.Cmd, hammerBatch)
			for i := range cmds {
				cmds[i] = pipe.Do(ctx, "RL.ALLOW", "hot", hammerCapacity, slowRate)
			}
			pipe.Exec(ctx)
			for _, cmd := range cmds {
				got, err := cmd.Int64Slice()
				h.record(got, err, hammerCapacity)
			}
		})
	}
	close(startGate)
	wg.Wait()
	h.check(t, hammerCapacity, hammerTotal)

	c := clients[0]
	if n, err := strconv.Atoi(infoField(t, c, "clients", "connected_clients")); err != nil || n < hammerConns {
		t.Errorf("connected_clients = %d, %v; want at least %d", n, err, hammerConns)
	}
	if got := infoField(t, c, "stats", "rl_allowed"); got != strconv.Itoa(hammerCapacity) {
		t.Errorf("rl_allowed = %s, want %d", got, hammerCapacity)
	}
	if got := infoField(t, c, "stats", "rl_denied"); got != strconv.Itoa(hammerTotal-hammerCapacity) {
		t.Errorf("rl_denied = %s, want %d", got, hammerTotal-hammerCapacity)
	}
	wantDecision(t, c, deniedFull(hammerCapacity), "RL.PEEK", "hot", hammerCapacity, slowRate)
}

func TestConcurrentRueidis(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	ctx := context.Background()
	allow := func(c rueidis.Client, key string) rueidis.Completed {
		return c.B().Arbitrary("RL.ALLOW").Keys(key).Args(strconv.Itoa(hammerCapacity), slowRate).Build()
	}
	// 50 clients, one connection each; and 50 goroutines sharing one
	// client, whose commands rueidis pipelines on one connection.
	shared := newRueidis(t, s, rueidis.ClientOption{DisableCache: true})
	own := make([]rueidis.Client, hammerConns)
	for i := range own {
		own[i] = newRueidis(t, s, rueidis.ClientOption{DisableCache: true})
	}
	for _, tc := range []struct {
		key     string
		clients func(i int) rueidis.Client
	}{
		{"hot", func(i int) rueidis.Client { return own[i] }},
		{"hot-shared", func(int) rueidis.Client { return shared }},
	} {
		h := &hammer{allowed: map[int64]int{}}
		var wg sync.WaitGroup
		startGate := make(chan struct{})
		for i := range hammerConns {
			c := tc.clients(i)
			wg.Go(func() {
				<-startGate
				for range hammerSingles {
					got, err := c.Do(ctx, allow(c, tc.key)).AsIntSlice()
					h.record(got, err, hammerCapacity)
				}
				multi := make(rueidis.Commands, hammerBatch)
				for j := range multi {
					multi[j] = allow(c, tc.key)
				}
				for _, res := range c.DoMulti(ctx, multi...) {
					got, err := res.AsIntSlice()
					h.record(got, err, hammerCapacity)
				}
			})
		}
		close(startGate)
		wg.Wait()
		t.Run(tc.key, func(t *testing.T) { h.check(t, hammerCapacity, hammerTotal) })
	}
	c := newGoRedis(t, s, nil)
	if n, err := strconv.Atoi(infoField(t, c, "clients", "connected_clients")); err != nil || n < hammerConns+1 {
		t.Errorf("connected_clients = %d, %v; want at least %d", n, err, hammerConns+1)
	}
	if got := infoField(t, c, "stats", "rl_allowed"); got != strconv.Itoa(2*hammerCapacity) {
		t.Errorf("rl_allowed = %s, want %d", got, 2*hammerCapacity)
	}
}
