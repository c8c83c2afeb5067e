package kv_test

import (
	"strings"
	"testing"

	"github.com/rlserver/rlserver/kv"
)

const (
	strErrExpireNX   = "ERR NX and XX, GT or LT options at the same time are not compatible"
	strErrExpireGTLT = "ERR GT and LT options at the same time are not compatible"
)

func TestExpire(t *testing.T) {
	runStrScenarios(t, []strScenario{
		{name: "expire and ttl", steps: []strStep{
			{0, "EXPIRE k 10", sInt(0), nil},
			{0, "TTL k", sInt(-2), nil},
			{0, "PTTL k", sInt(-2), nil},
			{0, "EXPIRETIME k", sInt(-2), nil},
			{0, "PEXPIRETIME k", sInt(-2), nil},
			{0, "PERSIST k", sInt(0), nil},
			{0, "SET k v", sOK, nil},
			{0, "TTL k", sInt(-1), nil},
			{0, "PTTL k", sInt(-1), nil},
			{0, "EXPIRETIME k", sInt(-1), nil},
			{0, "PEXPIRETIME k", sInt(-1), nil},
			{0, "PERSIST k", sInt(0), nil},
			{0, "EXPIRE k 10", sInt(1), nil},
			{0, "TTL k", sInt(10), nil},
			{0, "EXPIRETIME k", sInt(1_700_000_010), nil},
			{0, "PEXPIRE k 1499", sInt(1), nil},
			{0, "TTL k", sInt(1), nil},
			{0, "PEXPIRE k 1500", sInt(1), nil},
			{0, "TTL k", sInt(2), nil},
			{0, "PTTL k", sInt(1500), nil},
			{0, "EXPIREAT k 1700000100", sInt(1), nil},
			{0, "TTL k", sInt(100), nil},
			{0, "PEXPIREAT k 1700000000250", sInt(1), nil},
			{0, "PEXPIRETIME k", sInt(1_700_000_000_250), nil},
			{0, "EXPIRETIME k", sInt(1_700_000_000), nil},
			{0, "TTL k", sInt(0), nil},
			{249 * strMS, "PTTL k", sInt(1), nil},
			{250 * strMS, "GET k", sNil, nil},
			{strSec, "SET k v EX 10", sOK, nil},
			{strSec, "PERSIST k", sInt(1), nil},
			{strSec, "TTL k", sInt(-1), nil},
			{20 * strSec, "GET k", sBulk("v"), nil},
			// EXPIRE inside a millisecond counts from the whole one.
			{30*strSec + strMS/2, "PEXPIRE k 3", sInt(1), nil},
			{30*strSec + strMS/2, "PTTL k", sInt(3), nil},
			{30*strSec + 3*strMS, "EXISTS k", sInt(0), nil},
		}},
		{name: "past times delete", steps: []strStep{
			{0, "SET k v", sOK, nil},
			{0, "EXPIRE k -1", sInt(1), nil},
			{0, "EXISTS k", sInt(0), nil},
			{0, "SET k v", sOK, nil},
			{0, "EXPIRE k 0", sInt(1), nil},
			{0, "EXISTS k", sInt(0), nil},
			{0, "SET k v", sOK, nil},
			{0, "PEXPIRE k 0", sInt(1), nil},
			{0, "EXISTS k", sInt(0), nil},
			{0, "SET k v", sOK, nil},
			{0, "EXPIREAT k 1", sInt(1), nil},
			{0, "EXISTS k", sInt(0), nil},
			{0, "SET k v", sOK, nil},
			{0, "PEXPIREAT k 1700000000000", sInt(1), nil},
			{0, "EXISTS k", sInt(0), nil},
			{0, "SET k v", sOK, nil},
			{0, "PEXPIREAT k 1700000000001", sInt(1), nil},
			{0, "EXISTS k", sInt(1), nil},
			{strMS, "EXISTS k", sInt(0), nil},
			{strMS, "SET k v", sOK, nil},
			{strMS, "EXPIRE k -9223372036854775", sInt(1), nil},
			{strMS, "EXISTS k", sInt(0), nil},
		}},
		{name: "nx xx gt lt", steps: []strStep{
			{0, "EXPIRE k 10 NX", sInt(0), nil}, // missing
			{0, "SET k v", sOK, nil},
			{0, "EXPIRE k 10 XX", sInt(0), nil},
			// No TTL counts as an infinite one: GT never sets, LT does.
			{0, "EXPIRE k 10 GT", sInt(0), nil},
			{0, "TTL k", sInt(-1), nil},
			{0, "EXPIRE k 10 LT", sInt(1), nil},
			{0, "TTL k", sInt(10), nil},
			{0, "EXPIRE k 20 NX", sInt(0), nil},
			{0, "EXPIRE k 20 XX", sInt(1), nil},
			{0, "TTL k", sInt(20), nil},
			{0, "EXPIRE k 10 GT", sInt(0), nil},
			{0, "EXPIRE k 20 GT", sInt(0), nil},
			{0, "EXPIRE k 30 gt", sInt(1), nil},
			{0, "EXPIRE k 40 LT", sInt(0), nil},
			{0, "EXPIRE k 30 LT", sInt(0), nil},
			{0, "EXPIRE k 5 lt", sInt(1), nil},
			{0, "TTL k", sInt(5), nil},
			{0, "PEXPIRE k 5000 GT", sInt(0), nil},
			{0, "PEXPIRE k 5001 GT XX", sInt(1), nil},
			{0, "PEXPIREAT k 1700000005001 LT", sInt(0), nil},
			{0, "PEXPIREAT k 1700000005000 LT XX", sInt(1), nil},
			{0, "EXPIREAT k 1700000005 GT", sInt(0), nil},
			{0, "EXPIRE k -5 GT", sInt(0), nil},
			{0, "EXISTS k", sInt(1), nil},
			{0, "EXPIRE k -5 LT", sInt(1), nil},
			{0, "EXISTS k", sInt(0), nil},
			{0, "SET k v", sOK, nil},
			{0, "EXPIRE k 10 NX", sInt(1), nil},
			{0, "EXPIRE k 10 nx", sInt(0), nil},
			{0, "EXPIRE k 10 XX XX", sInt(1), nil},
		}},
		{name: "errors", steps: []strStep{
			{0, "SET k v", sOK, nil},
			{0, "EXPIRE k 10 foo", sErr("ERR Unsupported option foo"), nil},
			{0, "EXPIRE k 10 NX Bar", sErr("ERR Unsupported option Bar"), nil},
			{0, "EXPIRE k 10 NX XX", sErr(strErrExpireNX), nil},
			{0, "EXPIRE k 10 NX GT", sErr(strErrExpireNX), nil},
			{0, "EXPIRE k 10 LT NX", sErr(strErrExpireNX), nil},
			{0, "PEXPIRE k 10 GT LT", sErr(strErrExpireGTLT), nil},
			{0, "EXPIRE k abc NX XX", sErr(strErrExpireNX), nil}, // options are read first
			{0, "EXPIRE k abc", sErr(strErrNotInt), nil},
			{0, "EXPIRE k 1.5", sErr(strErrNotInt), nil},
			{0, "EXPIRE k 9223372036854776", sErr(strErrExpire("expire")), nil},
			{0, "EXPIRE k 9223372036854775", sErr(strErrExpire("expire")), nil},
			{0, "EXPIRE k -9223372036854776", sErr(strErrExpire("expire")), nil},
			{0, "PEXPIRE k 9223372036854775807", sErr(strErrExpire("pexpire")), nil},
			{0, "EXPIREAT k 9223372036854776", sErr(strErrExpire("expireat")), nil},
			{0, "EXPIRE nokey 9223372036854776", sErr(strErrExpire("expire")), nil},
			// Redis accepts expiries up to the largest int64 of ms; an
			// entry holds ns, so one past 2262 is refused (a missing key
			// still replies 0).
			{0, "PEXPIREAT k 9223372036855", sErr(strErrExpire("pexpireat")), nil},
			{0, "EXPIREAT k 9223372036854775", sErr(strErrExpire("expireat")), nil},
			{0, "EXPIREAT nokey 9223372036854775", sInt(0), nil},
			{0, "TTL k", sInt(-1), nil},
			{0, "EXPIRE k", strArity("expire"), nil},
			{0, "TTL", strArity("ttl"), nil},
			{0, "PERSIST k k", strArity("persist"), nil},
		}},
		{name: "other types", hashes: []string{"h"}, zsets: []string{"z"}, steps: []strStep{
			{0, "EXPIRE h 10", sInt(1), nil},
			{0, "PEXPIRE z 500", sInt(1), nil},
			{0, "TTL h", sInt(10), nil},
			{0, "PTTL z", sInt(500), nil},
			{0, "PERSIST h", sInt(1), nil},
			{0, "TTL h", sInt(-1), nil},
			{500 * strMS, "EXISTS z", sInt(0), nil},
			{500 * strMS, "TYPE h", sStatus("hash"), nil},
		}},
	})
}

// TestExpireLimiterKeys: a limiter key has no expiry of its own: TTL and
// PTTL report when its state is empty again, rounded up, and the
// commands that set an expiry are WRONGTYPE.
func TestExpireLimiterKeys(t *testing.T) {
	wt := sErr(strErrWrongType)
	// RL.ALLOW-like state: capacity 10, 1 token per second, one token
	// taken at strT0, so the bucket is full again at strT0+1s.
	runStrScenarios(t, []strScenario{{name: "limiter", limiters: []string{"rl"}, steps: []strStep{
		{0, "TTL rl", sInt(1), nil},
		{0, "PTTL rl", sInt(1000), nil},
		{0, "EXPIRETIME rl", sInt(1_700_000_001), nil},
		{0, "PEXPIRETIME rl", sInt(1_700_000_001_000), nil},
		{300 * strMS, "PTTL rl", sInt(700), nil},
		{300 * strMS, "TTL rl", sInt(1), nil},
		{300*strMS + 1, "PTTL rl", sInt(700), nil},
		{0, "EXPIRE rl 10", wt, nil},
		{0, "PEXPIRE rl 10", wt, nil},
		{0, "EXPIREAT rl 1", wt, nil},
		{0, "PEXPIREAT rl 1", wt, nil},
		{0, "EXPIRE rl 10 NX", wt, nil},
		{0, "EXPIRE rl 10 foo", sErr("ERR Unsupported option foo"), nil},
		{0, "EXPIRE rl x", sErr(strErrNotInt), nil},
		{0, "PERSIST rl", wt, nil},
		{0, "TYPE rl", sStatus("rl-gcra"), nil},
		{strSec, "TTL rl", sInt(-2), nil},
		{strSec, "TYPE rl", sStatus("none"), nil},
	}}})
}

func TestGenericTxnCommands(t *testing.T) {
	runStrScenarios(t, []strScenario{
		{name: "del exists type", hashes: []string{"h"}, zsets: []string{"z"}, limiters: []string{"rl"}, steps: []strStep{
			{0, "SET s v", sOK, nil},
			{0, "SET n 5", sOK, nil},
			{0, "TYPE s", sStatus("string"), nil},
			{0, "TYPE n", sStatus("string"), nil},
			{0, "TYPE h", sStatus("hash"), nil},
			{0, "TYPE z", sStatus("zset"), nil},
			{0, "TYPE rl", sStatus("rl-gcra"), nil},
			{0, "TYPE none", sStatus("none"), nil},
			{0, "EXISTS s n h z rl none", sInt(5), nil},
			{0, "EXISTS s s s", sInt(3), nil},
			{0, "EXISTS none", sInt(0), nil},
			{0, "DEL s s none", sInt(1), nil},
			{0, "UNLINK h rl", sInt(2), nil},
			{0, "EXISTS s h rl", sInt(0), nil},
			{0, "DEL z n", sInt(2), nil},
			{0, "DEL", strArity("del"), nil},
			{0, "EXISTS", strArity("exists"), nil},
			{0, "SET e v PX 1", sOK, nil},
			{strMS, "EXISTS e", sInt(0), nil},
			{strMS, "DEL e", sInt(0), nil},
			{strMS, "TYPE e", sStatus("none"), nil},
		}},
		{name: "ping echo time", steps: []strStep{
			{0, "PING", sStatus("PONG"), nil},
			{0, "PING hello", sBulk("hello"), nil},
			{0, "", sBulk(""), []string{"PING", ""}},
			{0, "PING a b", sErr("ERR wrong number of arguments for 'ping' command"), nil},
			{0, "ECHO hi", sBulk("hi"), nil},
			{0, "ECHO", strArity("echo"), nil},
			{0, "TIME", sArr(sBulk("1700000000"), sBulk("0")), nil},
			{1234567891, "TIME", sArr(sBulk("1700000001"), sBulk("234567")), nil},
			{1234567891, "TIME x", strArity("time"), nil},
		}},
		{name: "resp3", resp3: true, steps: []strStep{
			{0, "PING", sStatus("PONG"), nil},
			{0, "TYPE x", sStatus("none"), nil},
			{0, "TIME", sArr(sBulk("1700000000"), sBulk("0")), nil},
		}},
	})
}

func TestKeySpecs(t *testing.T) {
	for _, c := range []struct {
		name               string
		arity, first, last int
		flags, acl, group  string
		txnOnly            bool
	}{
		{"expire", -3, 1, 1, "write fast", "@keyspace @write @fast", "generic", false},
		{"pexpireat", -3, 1, 1, "write fast", "@keyspace @write @fast", "generic", false},
		{"ttl", 2, 1, 1, "readonly fast", "@keyspace @read @fast", "generic", true},
		{"pexpiretime", 2, 1, 1, "readonly fast", "@keyspace @read @fast", "generic", false},
		{"pttl", 2, 1, 1, "readonly fast", "@keyspace @read @fast", "generic", true},
		{"persist", 2, 1, 1, "write fast", "@keyspace @write @fast", "generic", false},
		{"del", -2, 1, -1, "write", "@keyspace @write @slow", "generic", true},
		{"unlink", -2, 1, -1, "write fast", "@keyspace @write @fast", "generic", true},
		{"exists", -2, 1, -1, "readonly fast", "@keyspace @read @fast", "generic", true},
		{"type", 2, 1, 1, "readonly fast", "@keyspace @read @fast", "generic", true},
		{"ping", -1, 0, 0, "fast", "@fast @connection", "connection", true},
		{"echo", 2, 0, 0, "loading stale fast", "@fast @connection", "connection", true},
		{"time", 1, 0, 0, "loading stale fast", "@fast", "server", true},
	} {
		s, ok := kv.Lookup([]byte(c.name))
		if !ok {
			t.Fatalf("%s not registered", c.name)
		}
		if s.Arity != c.arity || s.FirstKey != c.first || s.LastKey != c.last ||
			strings.Join(s.Flags, " ") != c.flags || strings.Join(s.ACL, " ") != c.acl ||
			s.Group != c.group || s.TxnOnly != c.txnOnly || s.Since == "" || s.Summary == "" {
			t.Errorf("%s: %+v", c.name, *s)
		}
	}
}
