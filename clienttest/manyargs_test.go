package clienttest

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// TestManyArgs: a DEL and an EXISTS of 100,000 keys pass with the default
// --max-args (it was 1024, and a 1,024-key DEL got "invalid multibulk
// length" and a closed connection); CONFIG GET reports the default limits.
func TestManyArgs(t *testing.T) {
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	ctx := context.Background()
	const n = 100_000
	keys := make([]string, n)
	pipe := c.Pipeline()
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
		if i%2 == 0 { // half of them exist
			pipe.Do(ctx, "RL.ALLOW", keys[i], 10, 0.001) // live for 1000 s: creating them may take seconds
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("creating keys: %v", err)
	}
	if got, err := c.Exists(ctx, keys...).Result(); err != nil || got != n/2 {
		t.Fatalf("EXISTS of %d keys: %d, %v; want %d", n, got, err, n/2)
	}
	if got, err := c.Del(ctx, keys...).Result(); err != nil || got != n/2 {
		t.Fatalf("DEL of %d keys: %d, %v; want %d", n, got, err, n/2)
	}
	if got, err := c.Exists(ctx, keys...).Result(); err != nil || got != 0 {
		t.Fatalf("EXISTS after DEL: %d, %v; want 0", got, err)
	}
	if got, err := c.DBSize(ctx).Result(); err != nil || got != 0 {
		t.Fatalf("DBSIZE after DEL: %d, %v; want 0", got, err)
	}
	got, err := c.ConfigGet(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got["max-args"] != "1048576" || got["client-query-buffer-limit"] != "1073741824" {
		t.Errorf("CONFIG GET max-args %q, client-query-buffer-limit %q; want 1048576 and 1073741824", got["max-args"], got["client-query-buffer-limit"])
	}
}

// TestManyArgsLimits: a count past --max-args gets Redis's protocol error
// and the connection closes; a command larger than
// --client-query-buffer-limit closes the connection with the query-buffer
// error; a count announced but never sent costs the server nothing and
// other clients are served.
func TestManyArgsLimits(t *testing.T) {
	s := start(t, opts{args: []string{"--max-args", "100", "--client-query-buffer-limit", "1mb"}})
	ok := s.raw(t)
	ok.do(badEnc(append([]string{"EXISTS"}, strings.Split(strings.Repeat("a ", 99), " ")[:99]...)...), ":0\r\n")

	bad := s.raw(t)
	bad.send(badEnc(append([]string{"EXISTS"}, strings.Split(strings.Repeat("a ", 100), " ")[:100]...)...))
	bad.expect("-ERR Protocol error: invalid multibulk length\r\n")
	bad.expectEOF()

	// Announced but never sent: the connection waits, the others are served.
	idle := s.raw(t)
	idle.send("*100\r\n")
	ok.do("PING\r\n", "+PONG\r\n")

	// Two bulks of 600 KiB each: each within proto-max-bulk-len, together
	// past the 1 MiB query buffer.
	big := s.raw(t)
	big.send(badEnc("EXISTS", strings.Repeat("x", 600<<10), strings.Repeat("y", 600<<10)))
	big.expect("-ERR Protocol error: query buffer limit exceeded\r\n")
	big.expectEOF()
	ok.do("PING\r\n", "+PONG\r\n")

	for _, tc := range []struct{ flag, value, want string }{
		{"--max-args", "2147483648", "invalid value 2147483648 for --max-args: must be between 1 and 2147483647"},
		{"--client-query-buffer-limit", "1kb", `invalid value "1kb" for --client-query-buffer-limit`},
	} {
		_, out, code := runBinary(t, nil, "--addr", "127.0.0.1:0", tc.flag, tc.value)
		if code == 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%s %s: exit %d, output %q; want an error containing %q", tc.flag, tc.value, code, out, tc.want)
		}
	}
}
