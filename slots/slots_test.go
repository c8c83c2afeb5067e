package slots

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestOfHashTags(t *testing.T) {
	// Each key hashes as the string beside it (Redis's cluster spec and
	// tests: only a non-empty tag between the first '{' and the first '}'
	// after it counts).
	same := []struct{ key, hashed string }{
		{"{user1000}.following", "user1000"},
		{"{user1000}.followers", "user1000"},
		{"foo{}{bar}", "foo{}{bar}"},
		{"foo{{bar}}zap", "{bar"},
		{"foo{bar}{zap}", "bar"},
		{"{}", "{}"},
		{"{", "{"},
		{"}{", "}{"},
		{"a{b", "a{b"},
		{"a}b{c}", "c"},
		{"{a}", "a"},
		{"x{\x00\xff}y", "\x00\xff"},
		{"{{}}", "{"},
		{"", ""},
	}
	for _, c := range same {
		if got, want := Of([]byte(c.key)), Of([]byte(c.hashed)); got != want && c.key != c.hashed {
			t.Errorf("Of(%q) = %d, want Of(%q) = %d", c.key, got, c.hashed, want)
		}
		if got, want := Of([]byte(c.key)), int(crc16([]byte(c.hashed))%Count); got != want {
			t.Errorf("Of(%q) = %d, want crc16(%q)%%16384 = %d", c.key, got, c.hashed, want)
		}
		if got, want := OfString(c.key), Of([]byte(c.key)); got != want {
			t.Errorf("OfString(%q) = %d, Of = %d", c.key, got, want)
		}
	}
	// Values Redis 7.0 returns for CLUSTER KEYSLOT, and the CRC16-XMODEM
	// check value (crc16("123456789") = 0x31C3, as Redis's crc16.c says).
	fixed := []struct {
		key  string
		slot int
	}{
		{"", 0},
		{"foo", 12182},
		{"bar", 5061},
		{"123456789", 0x31C3},
		{"{user1000}.following", 3443},
		{"foo{}{bar}", 8363},
		{"foo{{bar}}zap", 4015},
		{"foo{bar}{zap}", 5061},
	}
	for _, c := range fixed {
		if got := Of([]byte(c.key)); got != c.slot {
			t.Errorf("Of(%q) = %d, want %d", c.key, got, c.slot)
		}
	}
}

func TestRuns(t *testing.T) {
	var owners [Count]string
	for s := 0; s < 100; s++ {
		owners[s] = "a"
	}
	owners[100] = "b"
	for s := 200; s < Count; s++ {
		owners[s] = "a"
	}
	got := Runs(&owners, "")
	want := []Run[string]{{0, 99, "a"}, {100, 100, "b"}, {200, Count - 1, "a"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Runs = %v, want %v", got, want)
	}
	var none [Count]string
	if got := Runs(&none, ""); len(got) != 0 {
		t.Errorf("Runs of an empty map = %v, want none", got)
	}
}

// TestOfMatchesRedis compares Of with CLUSTER KEYSLOT of a real Redis in
// cluster mode, for random binary keys and keys with every kind of tag.
func TestOfMatchesRedis(t *testing.T) {
	addr := startRedisCluster(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab{}{}x\x00\xff")
	var keys []string
	for range 3000 {
		n := rng.IntN(12)
		b := make([]byte, n)
		for i := range b {
			if rng.IntN(2) == 0 {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			} else {
				b[i] = byte(rng.IntN(256))
			}
		}
		keys = append(keys, string(b))
	}
	for i := range 1000 {
		keys = append(keys, "{user"+strconv.Itoa(i)+"}:login", "rl:"+strconv.Itoa(i), "x{"+strconv.Itoa(i)+"}{y}")
	}
	pipe := rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.ClusterKeySlot(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if got, want := Of([]byte(k)), int(cmds[i].Val()); got != want {
			t.Errorf("Of(%q) = %d, Redis says %d", k, got, want)
		}
	}
}

// startRedisCluster runs Debian's redis-server in cluster mode (no slots
// assigned: CLUSTER KEYSLOT needs none) on a free loopback port in a temp
// dir, until the test ends.
func startRedisCluster(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		// make test does not install it (Debian's package starts a Redis
		// on port 6379, where make run listens): CI does and requires it.
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is required (Debian's redis-server package): ", err)
		}
		t.Skip("redis-server not found (Debian's redis-server package): ", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
		"--dir", dir, "--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for rdb.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not answer PING within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return addr
}

// crc16 is a bitwise CRC16-XMODEM, a reference independent of the table.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
