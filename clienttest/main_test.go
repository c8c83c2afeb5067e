package clienttest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// raceEnabled is set by race_test.go when the tests run with -race.
var raceEnabled bool

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rlserver-clienttest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "clienttest:", err)
		os.Exit(1)
	}
	serverBin, err = buildServer(dir, raceEnabled)
	if err != nil {
		fmt.Fprintln(os.Stderr, "clienttest:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// The slow rate: one token per 1000 s, so nothing refills during a test.
const (
	slowRate = "0.001"
	periodMs = int64(1_000_000) // ms per token at slowRate
	// slackMs bounds how far the wall clock may move between the moment a
	// bucket was changed and a later look at it, for fields that count down.
	slackMs = int64(60_000)
)

// span is an inclusive range of acceptable values.
type span struct{ lo, hi int64 }

func exactly(v int64) span { return span{v, v} }

// aged is a countdown that was ms when its state was written and has
// shrunk by at most slackMs since.
func aged(ms int64) span { return span{ms - slackMs, ms} }

func (s span) has(v int64) bool { return s.lo <= v && v <= s.hi }

func (s span) String() string {
	if s.lo == s.hi {
		return strconv.FormatInt(s.lo, 10)
	}
	return fmt.Sprintf("%d..%d", s.lo, s.hi)
}

// decision is an expected RL.ALLOW / RL.PEEK reply.
type decision struct {
	allowed, remaining int64
	retry, reset       span
}

func (d decision) match(got []int64) bool {
	return len(got) == 4 && got[0] == d.allowed && got[1] == d.remaining && d.retry.has(got[2]) && d.reset.has(got[3])
}

func (d decision) String() string {
	return fmt.Sprintf("[%d %d %v %v]", d.allowed, d.remaining, d.retry, d.reset)
}

// allowedAt is the reply to the n-th unit call on a fresh bucket of
// capacity (n <= capacity) at slowRate.
func allowedAt(capacity, n int64) decision {
	return decision{1, capacity - n, exactly(0), aged(n * periodMs)}
}

// deniedFull is the reply to a unit call on an emptied bucket of capacity
// at slowRate.
func deniedFull(capacity int64) decision {
	return decision{0, 0, aged(periodMs), aged(capacity * periodMs)}
}

// int64s converts a go-redis or rueidis array of integers.
func int64s(t testing.TB, v any) []int64 {
	t.Helper()
	arr, ok := v.([]any)
	if !ok {
		t.Fatalf("reply %#v is not an array", v)
	}
	out := make([]int64, len(arr))
	for i, e := range arr {
		n, ok := e.(int64)
		if !ok {
			t.Fatalf("element %d of %#v is not an integer", i, v)
		}
		out[i] = n
	}
	return out
}

// newGoRedis returns a go-redis client for s, closed at cleanup. o may be
// nil; its Addr is set.
func newGoRedis(t testing.TB, s *server, o *redis.Options) *redis.Client {
	t.Helper()
	if o == nil {
		o = &redis.Options{}
	}
	o.Addr = s.addr
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// newRueidis returns a rueidis client for s, closed at cleanup.
func newRueidis(t testing.TB, s *server, o rueidis.ClientOption) rueidis.Client {
	t.Helper()
	o.InitAddress = []string{s.addr}
	c, err := rueidis.NewClient(o)
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// do runs one command with go-redis and fails the test on an error reply.
func do(t testing.TB, c *redis.Client, args ...any) any {
	t.Helper()
	v, err := c.Do(context.Background(), args...).Result()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

// doInt runs a command whose reply is an integer.
func doInt(t testing.TB, c *redis.Client, args ...any) int64 {
	t.Helper()
	v := do(t, c, args...)
	n, ok := v.(int64)
	if !ok {
		t.Fatalf("%v: reply %#v, want an integer", args, v)
	}
	return n
}

// wantInt checks an integer reply.
func wantInt(t testing.TB, c *redis.Client, want int64, args ...any) {
	t.Helper()
	if got := doInt(t, c, args...); got != want {
		t.Errorf("%v = %d, want %d", args, got, want)
	}
}

// wantReply checks a reply against want with reflect.DeepEqual.
func wantReply(t testing.TB, c *redis.Client, want any, args ...any) {
	t.Helper()
	if got := do(t, c, args...); !reflect.DeepEqual(got, want) {
		t.Errorf("%v = %#v, want %#v", args, got, want)
	}
}

// wantErr checks that a command gets exactly the error reply want.
func wantErr(t testing.TB, c *redis.Client, want string, args ...any) {
	t.Helper()
	v, err := c.Do(context.Background(), args...).Result()
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		t.Errorf("%q: reply %#v, %v; want error %q", args, v, err, want)
		return
	}
	if err.Error() != want {
		t.Errorf("%q: error %q, want %q", args, err.Error(), want)
	}
}

// wantDecision runs an RL.ALLOW or RL.PEEK and checks its reply.
func wantDecision(t testing.TB, c *redis.Client, want decision, args ...any) {
	t.Helper()
	got := int64s(t, do(t, c, args...))
	if !want.match(got) {
		t.Errorf("%v = %v, want %v", args, got, want)
	}
}
