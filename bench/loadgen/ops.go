package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// op is one kind of command in the mix, pre-encoded around its key.
type op struct {
	name        string
	keyPrefix   string // one prefix per kind of state, so no command meets WRONGTYPE
	head, tail  []byte // RESP: the array header and arguments before the key, the arguments after it
	hasKey      bool
	deniedFirst int64 // the first reply element that means denied
}

// appendCommand appends the command for key to dst.
func (o *op) appendCommand(dst, key []byte) []byte {
	dst = append(dst, o.head...)
	if o.hasKey {
		dst = append(dst, '$')
		dst = strconv.AppendInt(dst, int64(len(key)), 10)
		dst = append(dst, '\r', '\n')
		dst = append(dst, key...)
		dst = append(dst, '\r', '\n')
	}
	return append(dst, o.tail...)
}

// opSpec describes a command by its arguments around the key, given the
// limit L, the rate L/window in tokens per second, the window in ms and in
// whole seconds (at least 1).
type opSpec struct {
	keyPrefix   string
	deniedFirst int64
	args        func(limit int, rate string, windowMs, windowSec int64) (before, after []string)
}

// The token-bucket commands share one keyspace (the same GCRA state, the
// same parameters expressed each command's way).
var opSpecs = map[string]opSpec{
	"ping": {"", -1, func(int, string, int64, int64) ([]string, []string) { return []string{"PING"}, nil }},
	"rl.allow": {"lg:tb:", 0, func(l int, r string, _, _ int64) ([]string, []string) {
		return []string{"RL.ALLOW"}, []string{strconv.Itoa(l), r, "1"}
	}},
	"rl.peek": {"lg:tb:", 0, func(l int, r string, _, _ int64) ([]string, []string) {
		return []string{"RL.PEEK"}, []string{strconv.Itoa(l), r, "1"}
	}},
	"cl.throttle": {"lg:tb:", 1, func(l int, _ string, _, s int64) ([]string, []string) {
		return []string{"CL.THROTTLE"}, []string{strconv.Itoa(l - 1), strconv.Itoa(l), strconv.FormatInt(s, 10), "1"}
	}},
	"gcra": {"lg:tb:", 1, func(l int, _ string, _, s int64) ([]string, []string) {
		return []string{"GCRA"}, []string{strconv.Itoa(l - 1), strconv.Itoa(l), strconv.FormatInt(s, 10)}
	}},
	"rl.shape": {"lg:sh:", 0, func(l int, r string, _, _ int64) ([]string, []string) {
		return []string{"RL.SHAPE"}, []string{strconv.Itoa(l), r, "1"}
	}},
	"rl.fixed": {"lg:fx:", 0, func(l int, _ string, ms, _ int64) ([]string, []string) {
		return []string{"RL.FIXED"}, []string{strconv.Itoa(l), strconv.FormatInt(ms, 10), "1"}
	}},
	"rl.sliding": {"lg:sl:", 0, func(l int, _ string, ms, _ int64) ([]string, []string) {
		return []string{"RL.SLIDING"}, []string{strconv.Itoa(l), strconv.FormatInt(ms, 10), "1"}
	}},
	"rl.log": {"lg:lo:", 0, func(l int, _ string, ms, _ int64) ([]string, []string) {
		return []string{"RL.LOG"}, []string{strconv.Itoa(l), strconv.FormatInt(ms, 10), "1"}
	}},
}

func opNames() []string {
	var names []string
	for n := range opSpecs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// parseMix turns "name=weight,..." into the ops in that order and their
// cumulative weights (weights[i] is the sum of the first i+1 weights), so a
// uniform draw w in [0, total) picks the first op with w < weights[i].
func parseMix(cfg config) ([]op, []int, error) {
	limit := cfg.limit
	windowMs := cfg.window.Milliseconds()
	windowSec := max(int64(math.Ceil(cfg.window.Seconds())), 1)
	rate := strconv.FormatFloat(float64(limit)/cfg.window.Seconds(), 'f', -1, 64)
	var ops []op
	var weights []int
	total := 0
	seen := map[string]bool{}
	for part := range strings.SplitSeq(cfg.mix, ",") {
		name, w, ok := strings.Cut(strings.TrimSpace(part), "=")
		name = strings.ToLower(strings.TrimSpace(name))
		weight, err := strconv.Atoi(strings.TrimSpace(w))
		if !ok || err != nil || weight < 0 || weight > 1_000_000 {
			return nil, nil, fmt.Errorf("-mix: %q is not name=weight (a whole number from 0 to 1000000)", part)
		}
		spec, known := opSpecs[name]
		if !known {
			return nil, nil, fmt.Errorf("-mix: unknown command %q (known: %s)", name, strings.Join(opNames(), ", "))
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("-mix: %s given twice", name)
		}
		seen[name] = true
		if weight == 0 {
			continue
		}
		before, after := spec.args(limit, rate, windowMs, windowSec)
		if cfg.evalsha != "" {
			switch name {
			case "rl.allow":
				before = []string{"EVALSHA", cfg.evalsha, "1"}
			case "ping":
			default:
				return nil, nil, fmt.Errorf("-mix: with -evalsha only rl.allow and ping can be sent (Redis has no %s)", name)
			}
		}
		hasKey := name != "ping"
		n := len(before) + len(after)
		if hasKey {
			n++
		}
		head := fmt.Appendf(nil, "*%d\r\n", n)
		head = appendBulks(head, before...)
		total += weight
		ops = append(ops, op{name: name, keyPrefix: spec.keyPrefix, head: head, tail: appendBulks(nil, after...),
			hasKey: hasKey, deniedFirst: spec.deniedFirst})
		weights = append(weights, total)
	}
	if total == 0 {
		return nil, nil, fmt.Errorf("-mix %q has no command with a weight above 0", cfg.mix)
	}
	return ops, weights, nil
}

// appendBulks appends each argument as a RESP bulk string (the caller
// writes the array header).
func appendBulks(dst []byte, args ...string) []byte {
	for _, a := range args {
		dst = append(dst, '$')
		dst = strconv.AppendInt(dst, int64(len(a)), 10)
		dst = append(dst, '\r', '\n')
		dst = append(dst, a...)
		dst = append(dst, '\r', '\n')
	}
	return dst
}
