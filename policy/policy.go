// Package policy holds rlserver's named rate-limit policies: a name bound
// to an algorithm and its parameters, changed at run time (RL.POLICY) and
// used by RL.CHECK, which names a policy instead of passing parameters.
//
// A policy's KIND and parameters mirror the limiter commands' arguments
// after the key, and are validated by the same engine constructors:
//
//	ALLOW    capacity rate                          RL.ALLOW
//	THROTTLE max_burst count_per_period period      CL.THROTTLE (period in seconds)
//	FIXED    limit window_ms                        RL.FIXED
//	SLIDING  limit window_ms                        RL.SLIDING
//	LOG      limit window_ms                        RL.LOG
//	SHAPE    capacity rate                          RL.SHAPE
//
// A Store holds the policies in force. Reads (Get, Resolve) load one
// atomic pointer to an immutable set, so they are cheap and safe from any
// number of goroutines; writes copy the set. The policies are part of the
// replicated and saved state: the standalone backend changes them directly
// when running alone, the cluster's FSM when it applies a log entry.
//
// Resolve turns (policy, key, cost) into an engine.Request marked Scaled:
// the engine keeps the parameters with the state and rescales it when a
// policy's parameters change: a token bucket keeps the tokens in use,
// capped at the new capacity, and refills them at the new rate (see
// docs/policies.md for the rules per algorithm).
package policy

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/rlserver/rlserver/engine"
)

// Bounds. A policy set is small and read on every RL.CHECK; the bounds
// keep it, INFO's policy section and the metrics' label set small too.
const (
	// MaxPolicies is the most policies a Store holds.
	MaxPolicies = 10000
	// MaxNameLen is the longest policy name, in bytes.
	MaxNameLen = 64
)

// Errors. The server package maps them (and the engine's validation errors,
// returned as they are) to wire text.
var (
	ErrUnknown     = errors.New("unknown policy")
	ErrBadName     = errors.New("invalid policy name")
	ErrUnknownKind = errors.New("unknown policy kind")
	ErrArity       = errors.New("wrong number of parameters for the policy kind")
	ErrNotInteger  = errors.New("parameter is not an integer or out of range")
	ErrNotFloat    = errors.New("parameter is not a valid float")
	ErrTooMany     = errors.New("too many policies")
)

// Kinds, in the order the package comment lists them.
var kinds = []struct {
	word  string
	build func(params []string) (engine.Request, []string, error)
}{
	{"ALLOW", bucket(engine.TokenBucket)},
	{"THROTTLE", throttle},
	{"FIXED", window(engine.Fixed)},
	{"SLIDING", window(engine.Sliding)},
	{"LOG", window(engine.Log)},
	{"SHAPE", bucket(engine.Shape)},
}

// Policy is one named policy. It is immutable once made by Parse.
type Policy struct {
	Name   string
	Kind   string   // upper case: ALLOW, THROTTLE, FIXED, SLIDING, LOG, SHAPE
	Params []string // normalised: integers in decimal, rates in Go's shortest form

	tmpl engine.Request // Op and parameters; Key and Cost are set by Resolve
}

// Words is the definition as RL.POLICY GET gives it and the file and the
// snapshots hold it: name, KIND, params.
func (p *Policy) Words() []string {
	return append([]string{p.Name, p.Kind}, p.Params...)
}

// String is the definition as one line of a policy file.
func (p *Policy) String() string { return strings.Join(p.Words(), " ") }

// Op is the engine operation the policy's requests take.
func (p *Policy) Op() engine.Op { return p.tmpl.Op }

// Request builds the policy's request on key taking cost units: the
// engine request the matching limiter command would build, marked Scaled.
// Cost 0 is a read-only peek. cost must be >= 0.
func (p *Policy) Request(key []byte, cost int64) engine.Request {
	r := p.tmpl
	r.Key = key
	r.Cost = cost
	r.ReadOnly = cost == 0
	r.Scaled = true
	return r
}

// ValidName reports whether name may name a policy: 1 to MaxNameLen bytes
// of letters, digits, '_', '-' and '.', and not COST (RL.CHECK's option).
// The restricted alphabet keeps names safe in INFO lines, metric labels
// and the whitespace-separated policy file.
func ValidName(name []byte) bool {
	if len(name) == 0 || len(name) > MaxNameLen || strings.EqualFold(string(name), "cost") {
		return false
	}
	for _, c := range name {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}

// Parse makes a policy from its words: name, KIND (any case), params.
// Errors are ErrBadName, ErrUnknownKind, ErrArity, ErrNotInteger,
// ErrNotFloat, or the engine constructor's validation error, exactly as
// the limiter command with these arguments would get.
func Parse(words []string) (*Policy, error) {
	if len(words) < 2 {
		return nil, ErrArity
	}
	if !ValidName([]byte(words[0])) {
		return nil, ErrBadName
	}
	kind := strings.ToUpper(words[1])
	for _, k := range kinds {
		if k.word != kind {
			continue
		}
		tmpl, params, err := k.build(words[2:])
		if err != nil {
			return nil, err
		}
		tmpl.Key, tmpl.Cost, tmpl.ReadOnly = nil, 0, false
		return &Policy{Name: words[0], Kind: kind, Params: params, tmpl: tmpl}, nil
	}
	return nil, ErrUnknownKind
}

// The parsers follow the server package's argument parsing byte for byte:
// integers as Redis reads them (no '+', at most 20 bytes), floats as
// strconv reads them, out-of-range floats as infinities.

func parseInt(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 20 || s[0] == '+' {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func parseFloat(s string) (float64, bool) {
	if len(s) == 0 || len(s) > 64 {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return f, true
		}
		return 0, false
	}
	return f, true
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// bucket parses `capacity rate` (ALLOW, SHAPE) as RL.ALLOW does.
func bucket(build func([]byte, int64, float64, int64) (engine.Request, error)) func([]string) (engine.Request, []string, error) {
	return func(p []string) (engine.Request, []string, error) {
		if len(p) != 2 {
			return engine.Request{}, nil, ErrArity
		}
		capacity, ok := parseInt(p[0])
		if !ok {
			return engine.Request{}, nil, ErrNotInteger
		}
		rate, ok := parseFloat(p[1])
		if !ok || math.IsNaN(rate) {
			return engine.Request{}, nil, ErrNotFloat
		}
		r, err := build(nil, capacity, rate, 1)
		if err != nil {
			return engine.Request{}, nil, err
		}
		return r, []string{itoa(capacity), strconv.FormatFloat(rate, 'g', -1, 64)}, nil
	}
}

// throttle parses `max_burst count_per_period period` as CL.THROTTLE
// does: integers, the period in seconds.
func throttle(p []string) (engine.Request, []string, error) {
	if len(p) != 3 {
		return engine.Request{}, nil, ErrArity
	}
	var n [3]int64
	for i, s := range p {
		v, ok := parseInt(s)
		if !ok {
			return engine.Request{}, nil, ErrNotInteger
		}
		n[i] = v
	}
	period := n[2]
	if period > math.MaxInt64/int64(1e9) {
		return engine.Request{}, nil, engine.ErrPeriodTooLong
	}
	if period < 0 {
		period = -1 // engine.Throttle refuses every negative period alike
	}
	r, err := engine.Throttle(nil, n[0], n[1], period*1e9, 1)
	if err != nil {
		return engine.Request{}, nil, err
	}
	return r, []string{itoa(n[0]), itoa(n[1]), itoa(n[2])}, nil
}

// window parses `limit window_ms` (FIXED, SLIDING, LOG).
func window(build func([]byte, int64, int64, int64) (engine.Request, error)) func([]string) (engine.Request, []string, error) {
	return func(p []string) (engine.Request, []string, error) {
		if len(p) != 2 {
			return engine.Request{}, nil, ErrArity
		}
		var n [2]int64
		for i, s := range p {
			v, ok := parseInt(s)
			if !ok {
				return engine.Request{}, nil, ErrNotInteger
			}
			n[i] = v
		}
		r, err := build(nil, n[0], n[1], 1)
		if err != nil {
			return engine.Request{}, nil, err
		}
		return r, []string{itoa(n[0]), itoa(n[1])}, nil
	}
}

// LineError is a policy file's error on one line.
type LineError struct {
	File string
	Line int // 1-based
	Err  error
}

func (e *LineError) Error() string {
	return fmt.Sprintf("policy file %s line %d: %v", e.File, e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// ErrDuplicate means a policy file defines a name twice.
var ErrDuplicate = errors.New("policy defined twice")
