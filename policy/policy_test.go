package policy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/rlserver/rlserver/engine"
)

func mustParse(t *testing.T, line string) *Policy {
	t.Helper()
	p, err := Parse(strings.Fields(line))
	if err != nil {
		t.Fatalf("Parse(%q): %v", line, err)
	}
	return p
}

// TestParseBuildsTheCommandsRequests: a policy's request is the one the
// matching limiter command builds with the same arguments, marked Scaled.
func TestParseBuildsTheCommandsRequests(t *testing.T) {
	key := []byte("k")
	must := func(r engine.Request, err error) engine.Request {
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	cases := []struct {
		line   string
		words  []string
		want   engine.Request
		params string
	}{
		{"a ALLOW 10 2.5", []string{"a", "ALLOW", "10", "2.5"}, must(engine.TokenBucket(key, 10, 2.5, 3)), ""},
		{"b allow 10 1e3", []string{"b", "ALLOW", "10", "1000"}, must(engine.TokenBucket(key, 10, 1000, 3)), ""},
		{"c THROTTLE 4 10 60", []string{"c", "THROTTLE", "4", "10", "60"}, must(engine.Throttle(key, 4, 10, 60e9, 3)), ""},
		{"d FIXED 100 60000", []string{"d", "FIXED", "100", "60000"}, must(engine.Fixed(key, 100, 60000, 3)), ""},
		{"e Sliding 100 1000", []string{"e", "SLIDING", "100", "1000"}, must(engine.Sliding(key, 100, 1000, 3)), ""},
		{"f LOG 5 1000", []string{"f", "LOG", "5", "1000"}, must(engine.Log(key, 5, 1000, 3)), ""},
		{"g.h-i_j SHAPE 10 0.5", []string{"g.h-i_j", "SHAPE", "10", "0.5"}, must(engine.Shape(key, 10, 0.5, 3)), ""},
	}
	for _, tc := range cases {
		p := mustParse(t, tc.line)
		if !reflect.DeepEqual(p.Words(), tc.words) {
			t.Errorf("%q: words %q, want %q", tc.line, p.Words(), tc.words)
		}
		got := p.Request(key, 3)
		want := tc.want
		want.Scaled = true
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: request %+v, want %+v", tc.line, got, want)
		}
		if peek := p.Request(key, 0); !peek.ReadOnly || peek.Cost != 0 {
			t.Errorf("%q: cost 0 is not a read-only peek: %+v", tc.line, peek)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		line string
		want error
	}{
		{"a", ErrArity},
		{"a ALLOW 10", ErrArity},
		{"a ALLOW 10 1 1", ErrArity},
		{"a THROTTLE 1 2", ErrArity},
		{"a FIXED 1", ErrArity},
		{"a BUCKET 1 2", ErrUnknownKind},
		{"cost ALLOW 1 1", ErrBadName},
		{"COST ALLOW 1 1", ErrBadName},
		{"a:b ALLOW 1 1", ErrBadName},
		{strings.Repeat("n", MaxNameLen+1) + " ALLOW 1 1", ErrBadName},
		{"a ALLOW x 1", ErrNotInteger},
		{"a ALLOW +1 1", ErrNotInteger},
		{"a ALLOW 1 x", ErrNotFloat},
		{"a ALLOW 1 nan", ErrNotFloat},
		{"a ALLOW 0 1", engine.ErrBadCapacity},
		{"a ALLOW 1 0", engine.ErrBadRate},
		{"a ALLOW 1 inf", engine.ErrBadRate},
		{"a SHAPE 1 -1", engine.ErrBadRate},
		{"a THROTTLE -1 1 1", engine.ErrBadBurst},
		{"a THROTTLE 1 0 1", engine.ErrZeroRate},
		{"a THROTTLE 1 1 -5", engine.ErrBadRate},
		{"a THROTTLE 1 1 9223372037", engine.ErrPeriodTooLong},
		{"a FIXED 0 1000", engine.ErrBadLimit},
		{"a FIXED 1 0", engine.ErrBadWindow},
		{"a LOG 100001 1000", engine.ErrLogLimitTooLarge},
		{"a SLIDING 1152921504606846977 1000", engine.ErrLimitTooLarge},
		{"a FIXED 1 1152921504607", engine.ErrWindowTooLong},
	}
	for _, tc := range cases {
		_, err := Parse(strings.Fields(tc.line))
		if !errors.Is(err, tc.want) {
			t.Errorf("Parse(%q) = %v, want %v", tc.line, err, tc.want)
		}
	}
	if n := strings.Repeat("n", MaxNameLen); !ValidName([]byte(n)) {
		t.Errorf("a name of %d bytes is refused", MaxNameLen)
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policies.conf")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestParseFile(t *testing.T) {
	path := writeFile(t, "# limits\n\nlogin ALLOW 5 0.1\n  \t# indented comment\napi\tFIXED  100 60000  \r\n")
	ps, err := ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range ps {
		got = append(got, p.String())
	}
	if want := []string{"login ALLOW 5 0.1", "api FIXED 100 60000"}; !reflect.DeepEqual(got, want) {
		t.Errorf("policies %q, want %q", got, want)
	}
}

// TestParseFileErrorsNameTheLine: a bad file is refused whole, with the
// line that is wrong.
func TestParseFileErrorsNameTheLine(t *testing.T) {
	cases := []struct {
		body string
		line int
		want error
	}{
		{"a ALLOW 1 1\n\n# c\nb ALLOW 0 1\nc ALLOW 1 1\n", 4, engine.ErrBadCapacity},
		{"a ALLOW 1 1\nb NOPE 1 1\n", 2, ErrUnknownKind},
		{"a ALLOW 1 1\nb FIXED 1\n", 2, ErrArity},
		{"a ALLOW 1 1\nb FIXED 1 1\na LOG 1 1\n", 3, ErrDuplicate},
		{"bad/name ALLOW 1 1\n", 1, ErrBadName},
		{"a ALLOW 1 1\n" + strings.Repeat("x", 5000) + "\n", 2, ErrLineTooLong},
	}
	for _, tc := range cases {
		path := writeFile(t, tc.body)
		ps, err := ParseFile(path)
		var le *LineError
		if !errors.As(err, &le) || le.Line != tc.line || !errors.Is(err, tc.want) || ps != nil {
			t.Errorf("%q: %v (%d policies), want line %d: %v", tc.body, err, len(ps), tc.line, tc.want)
			continue
		}
		if want := fmt.Sprintf("policy file %s line %d: ", path, tc.line); !strings.HasPrefix(err.Error(), want) {
			t.Errorf("error %q does not start with %q", err, want)
		}
	}
	if _, err := ParseFile(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	big := writeFile(t, strings.Repeat("# padding padding padding\n", MaxFileSize/20))
	if _, err := ParseFile(big); !errors.Is(err, ErrFileTooLarge) {
		t.Errorf("large file: %v", err)
	}
}

func TestFileBound(t *testing.T) {
	var b strings.Builder
	for i := range MaxPolicies + 1 {
		fmt.Fprintf(&b, "p%d ALLOW 1 1\n", i)
	}
	_, err := Read("f", []byte(b.String()))
	var le *LineError
	if !errors.As(err, &le) || le.Line != MaxPolicies+1 || !errors.Is(err, ErrTooMany) {
		t.Fatalf("%d policies: %v", MaxPolicies+1, err)
	}
}

func TestStore(t *testing.T) {
	s := NewStore()
	a, b := mustParse(t, "a ALLOW 1 1"), mustParse(t, "b FIXED 2 1000")
	if err := s.Set(b); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(a); err != nil {
		t.Fatal(err)
	}
	if got := s.Defs(); !reflect.DeepEqual(got, [][]string{{"a", "ALLOW", "1", "1"}, {"b", "FIXED", "2", "1000"}}) {
		t.Errorf("Defs = %q", got)
	}
	s.Record([]byte("a"), 2, 1)
	// Redefining keeps the counters; deleting drops them.
	if err := s.Set(mustParse(t, "a ALLOW 5 1")); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st[0] != (Stat{"a", 2, 1}) {
		t.Errorf("stats after redefinition %+v", st)
	}
	if p, _ := s.Get([]byte("a")); p.Params[0] != "5" {
		t.Errorf("redefinition not in force: %v", p)
	}
	if !s.Del("a") || s.Del("a") {
		t.Error("Del twice")
	}
	if _, err := s.Resolve([]byte("a"), []byte("k"), 1); !errors.Is(err, ErrUnknown) {
		t.Errorf("Resolve of a deleted policy: %v", err)
	}
	r, err := s.Resolve([]byte("b"), []byte("k"), 2)
	if err != nil || r.Op != engine.OpFixed || !r.Scaled || string(r.Key) != "k" || r.Cost != 2 {
		t.Errorf("Resolve = %+v, %v", r, err)
	}
	before := s.Changes()
	if err := s.Replace([]*Policy{a, a}); !errors.Is(err, ErrDuplicate) || s.Changes() != before || s.Len() != 1 {
		t.Errorf("Replace with a duplicate: %v, %d policies", err, s.Len())
	}
	if err := s.Replace(nil); err != nil || s.Len() != 0 {
		t.Errorf("Replace(nil): %v, %d", err, s.Len())
	}
}

func TestStoreBound(t *testing.T) {
	s := NewStore()
	ps := make([]*Policy, MaxPolicies)
	for i := range ps {
		ps[i] = mustParse(t, fmt.Sprintf("p%d ALLOW 1 1", i))
	}
	if err := s.Replace(ps); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(mustParse(t, "one-more ALLOW 1 1")); !errors.Is(err, ErrTooMany) {
		t.Errorf("Set beyond the bound: %v", err)
	}
	if err := s.Set(mustParse(t, "p7 ALLOW 2 1")); err != nil {
		t.Errorf("redefining at the bound: %v", err)
	}
	if err := s.Replace(append(ps, mustParse(t, "x ALLOW 1 1"))); !errors.Is(err, ErrTooMany) {
		t.Errorf("Replace beyond the bound: %v", err)
	}
}

// TestResolveBatch: a group with an unknown policy is left out whole; the
// requests around it are resolved and kept in order.
func TestResolveBatch(t *testing.T) {
	s := NewStore()
	s.Set(mustParse(t, "a ALLOW 10 1"))
	s.Set(mustParse(t, "b FIXED 5 1000"))
	plain, _ := engine.TokenBucket([]byte("p"), 3, 1, 1)
	reqs := []engine.Request{
		plain,
		{Key: []byte("k1"), Cost: 1, Tiers: 2}, {Key: []byte("k2"), Cost: 1}, // a, b
		{Key: []byte("k3"), Cost: 1, Tiers: 2}, {Key: []byte("k4"), Cost: 1}, // a, gone
		{Key: []byte("k5"), Cost: 0, Tiers: 1}, // b
	}
	names := [][]byte{nil, []byte("a"), []byte("b"), []byte("a"), []byte("gone"), []byte("b")}
	res := make([]engine.Result, len(reqs))
	out, idx := s.ResolveBatch(reqs, names, res)
	if !reflect.DeepEqual(idx, []int{0, 1, 2, 5}) {
		t.Fatalf("idx %v", idx)
	}
	if out[1].Op != engine.OpGCRA || out[1].Tiers != 2 || !out[1].Scaled || out[2].Op != engine.OpFixed || out[2].Tiers != 0 {
		t.Errorf("group resolved as %+v %+v", out[1], out[2])
	}
	if !out[3].ReadOnly || out[3].Tiers != 1 {
		t.Errorf("cost 0 tier %+v", out[3])
	}
	if !errors.Is(res[3].Err, engine.ErrGroupAborted) || !errors.Is(res[4].Err, ErrUnknown) {
		t.Errorf("failed group results %+v %+v", res[3], res[4])
	}
	if engine.ValidateBatch(out) != nil {
		t.Errorf("resolved batch does not validate: %v", engine.ValidateBatch(out))
	}
	if out, idx := s.ResolveBatch(reqs[:1], nil, res); idx != nil || &out[0] != &reqs[0] {
		t.Error("a batch without names is not passed through")
	}
	// In place: fails on the unknown policy, and the partly resolved
	// batch still resolves the same.
	inPlace := append([]engine.Request(nil), reqs...)
	if s.ResolveInPlace(inPlace, names) {
		t.Fatal("ResolveInPlace resolved an unknown policy")
	}
	res2 := make([]engine.Result, len(reqs))
	out2, idx2 := s.ResolveBatch(inPlace, names, res2)
	if !reflect.DeepEqual(out2, out) || !reflect.DeepEqual(idx2, idx) || !reflect.DeepEqual(res2, res) {
		t.Errorf("after a failed ResolveInPlace: %+v %v", out2, idx2)
	}
	ok := append([]engine.Request(nil), reqs[:3]...)
	if !s.ResolveInPlace(ok, names[:3]) || !reflect.DeepEqual(ok, out[:3]) {
		t.Errorf("ResolveInPlace = %+v, want %+v", ok, out[:3])
	}
}

// TestStoreConcurrentReads runs readers against a writer (with -race).
func TestStoreConcurrentReads(t *testing.T) {
	s := NewStore()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.Resolve([]byte("a"), []byte("k"), 1); err != nil && !errors.Is(err, ErrUnknown) {
					t.Error(err)
				}
				s.Record([]byte("a"), 1, 0)
				s.List()
			}
		}()
	}
	for i := range 200 {
		s.Set(mustParse(t, fmt.Sprintf("a ALLOW %d 1", i+1)))
		if i%3 == 0 {
			s.Del("a")
		}
	}
	close(stop)
	wg.Wait()
}
