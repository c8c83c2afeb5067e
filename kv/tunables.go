package kv

import (
	"strconv"
	"sync/atomic"

	"github.com/rlserver/rlserver/values"
)

// Redis's encoding thresholds (hash-max-listpack-entries...), which
// CONFIG SET takes: they change only which encoding OBJECT ENCODING names
// (Encoding) and when a set stops being an intset, since rlserver stores
// values its own way. list-max-listpack-size and list-compress-depth are
// taken and have no effect: Redis 7.0 names every list "quicklist".
var tunables = map[string]*atomic.Int64{}

// tunableAliases are the older names (ziplist) of the same settings.
var tunableAliases = map[string]string{
	"hash-max-ziplist-entries": "hash-max-listpack-entries",
	"hash-max-ziplist-value":   "hash-max-listpack-value",
	"zset-max-ziplist-entries": "zset-max-listpack-entries",
	"zset-max-ziplist-value":   "zset-max-listpack-value",
	"list-max-ziplist-size":    "list-max-listpack-size",
}

func init() {
	for name, v := range map[string]int64{
		"hash-max-listpack-entries": 128, "hash-max-listpack-value": 64,
		"zset-max-listpack-entries": 128, "zset-max-listpack-value": 64,
		"set-max-intset-entries": values.DefaultIntsetMax,
		"list-max-listpack-size": -2, "list-compress-depth": 0,
	} {
		n := new(atomic.Int64)
		n.Store(v)
		tunables[name] = n
	}
}

func tunable(name string) int64 { return tunables[name].Load() }

// Tunables lists the names CONFIG GET and SET take (aliases included)
// with their values.
func Tunables() map[string]string {
	out := map[string]string{}
	for name, n := range tunables {
		out[name] = strconv.FormatInt(n.Load(), 10)
	}
	for alias, name := range tunableAliases {
		out[alias] = out[name]
	}
	return out
}

// IsTunable reports whether name is one of the thresholds.
func IsTunable(name string) bool {
	if a, ok := tunableAliases[name]; ok {
		name = a
	}
	return tunables[name] != nil
}

// SetTunable sets a threshold from its CONFIG SET value; false when the
// value is not an integer.
func SetTunable(name, value string) bool {
	if a, ok := tunableAliases[name]; ok {
		name = a
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil || tunables[name] == nil {
		return false
	}
	tunables[name].Store(n)
	if name == "set-max-intset-entries" {
		values.SetIntsetMax(n)
	}
	return true
}
