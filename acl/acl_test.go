package acl

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// known stands for the command layer's table in these tests.
func known(name string) bool {
	return slices.Contains([]string{"ping", "flushall", "config", "config|get", "acl", "acl|whoami"}, name)
}

func aclList(a *ACL) []string {
	var out []string
	for _, n := range a.names {
		out = append(out, a.users[n].Describe())
	}
	return out
}

func TestParseACL(t *testing.T) {
	for _, tc := range []struct {
		name, file, requirePass string
		want                    []string
	}{
		{name: "empty file: Redis's default user", file: "",
			want: []string{"user default on nopass ~* &* +@all"}},
		{name: "requirepass sets the default user's password", file: "# no users\n", requirePass: "pw",
			want: []string{"user default on #" + sha("pw") + " ~* &* +@all"}},
		{name: "a new user starts off, with nothing", file: "user bob",
			want: []string{"user bob off resetchannels -@all", "user default on nopass ~* &* +@all"}},
		{name: "application user", file: "user app on >s3cret ~* +@ratelimit +@connection -@dangerous\n",
			want: []string{"user app on #" + sha("s3cret") + " ~* resetchannels -@all +@ratelimit +@connection -@dangerous",
				"user default on nopass ~* &* +@all"}},
		{name: "later rules win and replace earlier ones on the same target",
			file: "user ops on nopass allkeys allchannels +@all -flushall -config|get +flushall",
			want: []string{"user default on nopass ~* &* +@all", "user ops on nopass ~* &* +@all -config|get +flushall"}},
		{name: "nocommands resets the rules", file: "user x on nopass +@all -ping nocommands +ping",
			want: []string{"user default on nopass ~* &* +@all", "user x on nopass resetchannels -@all +ping"}},
		{name: "passwords, hashes, removal, quoting", file: "user x on >a >b \">c d\" #" + sha("e") + " <a !" + sha("e") + " >b",
			want: []string{"user default on nopass ~* &* +@all", "user x on #" + sha("b") + " #" + sha("c d") + " resetchannels -@all"}},
		{name: "nopass clears passwords, a password clears nopass", file: "user x on >a nopass\nuser y on nopass >b",
			want: []string{"user default on nopass ~* &* +@all", "user x on nopass resetchannels -@all",
				"user y on #" + sha("b") + " resetchannels -@all"}},
		{name: "key patterns", file: "user t on nopass ~tenant1:* %R~shared:* %W~audit:* %RW~x resetchannels &news",
			want: []string{"user default on nopass ~* &* +@all", "user t on nopass ~tenant1:* %R~shared:* %W~audit:* ~x resetchannels &news -@all"}},
		{name: "the file defines the default user", file: "user default on >pw +@all ~*\n  \n\tUSER other OFF",
			want: []string{"user default on #" + sha("pw") + " ~* resetchannels +@all", "user other off resetchannels -@all"}},
		{name: "reset and case-insensitive keywords", file: "user x ON NOPASS +@ALL ~* reset >p +PING",
			want: []string{"user default on nopass ~* &* +@all", "user x off #" + sha("p") + " resetchannels -@all +ping"}},
		{name: "Redis's extra keywords", file: "user x on nopass sanitize-payload skip-sanitize-payload clearselectors allcommands",
			want: []string{"user default on nopass ~* &* +@all", "user x on nopass resetchannels +@all"}},
		{name: "patterns with spaces and quotes are quoted", file: "user q on \"~a b\" '%R~x\"y' \"&\\x00\"",
			want: []string{"user default on nopass ~* &* +@all", "user q on \"~a b\" \"%R~x\\\"y\" resetchannels \"&\\x00\" -@all"}},
		{name: "CRLF lines and comments", file: "# users\r\nuser a on nopass\r\n#user b\r\n",
			want: []string{"user a on nopass resetchannels -@all", "user default on nopass ~* &* +@all"}},
	} {
		a, err := Parse([]byte(tc.file), tc.requirePass, known)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := aclList(a); !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

func TestParseACLErrors(t *testing.T) {
	for _, tc := range []struct{ file, requirePass, want string }{
		{"user app on\nuser app off", "", "line 2: user 'app' is already defined on line 1"},
		{"\n\nuser app on -flushal", "", "line 3: user 'app': '-flushal': unknown command 'flushal'"},
		{"user app +config|nope", "", "line 1: user 'app': '+config|nope': unknown command 'config|nope'"},
		{"user app +@ratelimits", "", "line 1: user 'app': '+@ratelimits': unknown category '@ratelimits' (see ACL CAT)"},
		{"user app on bogus", "", "line 1: user 'app': unknown rule 'bogus'"},
		{"user app on \">open", "", "line 1: unbalanced quotes"},
		{"users app on", "", "line 1: expected 'user <name> [rules...]', got \"users\""},
		{"user", "", "line 1: a user needs a name"},
		{"user a\x01b on", "", "line 1: invalid user name \"a b\": use printable characters, no spaces"},
		{"user app #abc", "", "line 1: user 'app': '#...': a password hash is 64 hexadecimal digits (SHA-256)"},
		{"user app >a <b", "", "line 1: user 'app': '<...': the password to remove is not one of the user's"},
		{"user app ~* ~foo", "", "line 1: user 'app': '~foo': a key pattern after '~*' (or allkeys) has no effect; use resetkeys first"},
		{"user app %X~foo", "", "line 1: user 'app': '%X~foo': key permissions are R, W or RW"},
		{"user app %foo", "", "line 1: user 'app': '%foo': expected %R~, %W~ or %RW~ before the key pattern"},
		{"user app (+ping ~*)", "", "line 1: user 'app': '(+ping': selectors are not supported"},
		{"user app (+ping)", "", "line 1: user 'app': '(+ping)': selectors are not supported"},
		{"user app on \"\"", "", "line 1: user 'app': empty rule"},
		{"user \"\" on", "", "line 1: invalid user name \"\": use printable characters, no spaces"},
		{"user x on\n# c\nuser default on nopass", "pw", "line 3: the file defines the default user, whose password requirepass would also set: give it its password in the file (user default on >password ...)"},
	} {
		_, err := Parse([]byte(tc.file), tc.requirePass, known)
		if err == nil || err.Error() != tc.want {
			t.Errorf("ParseACL(%q) = %v\nwant %s", tc.file, err, tc.want)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		pat, s string
		want   bool
	}{
		{"*", "maxclients", true}, {"max*", "maxclients", true}, {"max*", "port", false},
		{"p?rt", "port", true}, {"[pb]ort", "port", true}, {"[^p]ort", "port", false},
		{"[a-q]ort", "port", true}, {"save", "save", true}, {"sav", "save", false},
	}
	for _, c := range cases {
		if got := Glob(c.pat, c.s); got != c.want {
			t.Errorf("Glob(%q, %q) = %v, want %v", c.pat, c.s, got, c.want)
		}
	}
}

// TestGlobMatchAgainstReference compares the linear matcher with the
// straightforward recursive one it replaced, on random patterns and
// strings over a small alphabet.
func TestGlobMatchAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tokens := []string{"a", "b", "*", "?", "[ab]", "[^a]", "[a-b]", "\\*", "\\", "[", "]", "**"}
	for range 200000 {
		var p strings.Builder
		for range r.IntN(6) {
			p.WriteString(tokens[r.IntN(len(tokens))])
		}
		s := make([]byte, r.IntN(7))
		for i := range s {
			s[i] = "ab*[\\"[r.IntN(5)]
		}
		want := globMatchRef(p.String(), string(s))
		if got := Glob(p.String(), s); got != want {
			t.Fatalf("Glob(%q, %q) = %v, want %v", p.String(), s, got, want)
		}
	}
}

func TestKeyPatternPrefix(t *testing.T) {
	for _, tc := range []struct {
		pat, key string
		isPfx    bool
		want     bool
	}{
		{"tenant1:*", "tenant1:x", true, true}, {"tenant1:*", "tenant1:", true, true},
		{"tenant1:*", "tenant2:x", true, false}, {"tenant1:*", "tenant1", true, false},
		{"*", "", true, true}, {"t?:*", "t1:x", false, true}, {"a\\*", "a*", false, true},
		{"a\\*", "ab", false, false}, {"exact", "exact", false, true}, {"exact", "exactly", false, false},
	} {
		p := newKeyPattern(tc.pat, Read)
		if p.isPfx != tc.isPfx || p.match([]byte(tc.key)) != tc.want || Glob(tc.pat, tc.key) != tc.want {
			t.Errorf("%q on %q: prefix form %v, match %v; want %v, %v", tc.pat, tc.key, p.isPfx, p.match([]byte(tc.key)), tc.isPfx, tc.want)
		}
	}
}

// TestGlobMatchIsLinear: a pattern with many stars against a long key
// that does not match takes O(pattern*key) steps, not exponential time.
func TestGlobMatchIsLinear(t *testing.T) {
	key := []byte(strings.Repeat("a", 16<<10))
	start := time.Now()
	if Glob("*a*a*a*a*a*a*a*a*b", key) {
		t.Fatal("matched")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %v", d)
	}
}

func globMatchRef(pattern, s string) bool {
	for len(pattern) > 0 {
		switch pattern[0] {
		case '*':
			for len(pattern) > 1 && pattern[1] == '*' {
				pattern = pattern[1:]
			}
			if len(pattern) == 1 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if globMatchRef(pattern[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if len(s) == 0 {
				return false
			}
			s = s[1:]
			pattern = pattern[1:]
		case '[':
			if len(s) == 0 {
				return false
			}
			end := strings.IndexByte(pattern[1:], ']')
			if end < 0 {
				return false
			}
			class := pattern[1 : 1+end]
			pattern = pattern[2+end:]
			neg := strings.HasPrefix(class, "^")
			if neg {
				class = class[1:]
			}
			match := false
			for i := 0; i < len(class); i++ {
				if i+2 < len(class) && class[i+1] == '-' {
					if class[i] <= s[0] && s[0] <= class[i+2] {
						match = true
					}
					i += 2
				} else if class[i] == s[0] {
					match = true
				}
			}
			if match == neg {
				return false
			}
			s = s[1:]
		case '\\':
			if len(pattern) > 1 {
				pattern = pattern[1:]
			}
			fallthrough
		default:
			if len(s) == 0 || s[0] != pattern[0] {
				return false
			}
			s = s[1:]
			pattern = pattern[1:]
		}
	}
	return len(s) == 0
}

// FuzzParseACL: no file makes ParseACL panic, and a file it accepts
// describes users whose ACL LIST lines parse back to the same lines and
// command rules.
func FuzzParseACL(f *testing.F) {
	f.Add([]byte("user app on >app-pw ~* +@ratelimit +@connection -@dangerous\nuser cfg on >c-pw +config|get +acl|whoami"), "")
	f.Add([]byte("user a on >p ~x* %R~y +@all -config|get &c\nuser default off"), "pw")
	f.Add([]byte("user \"a\" '>b c' \"\\x41\""), "")
	f.Fuzz(func(t *testing.T, src []byte, pass string) {
		a, err := Parse(src, pass, nil)
		if err != nil {
			return
		}
		list := strings.Join(aclList(a), "\n")
		b, err := Parse([]byte(list), "", nil)
		if err != nil {
			t.Fatalf("ACL LIST does not parse back: %v\n%s", err, list)
		}
		if again := strings.Join(aclList(b), "\n"); again != list {
			t.Fatalf("ACL LIST changes on a round trip:\n%s\n%s", list, again)
		}
		for _, n := range a.names {
			if !slices.Equal(a.users[n].Rules(), b.users[n].Rules()) {
				t.Fatalf("user %s: permissions change on a round trip", n)
			}
		}
	})
}

func TestSanitize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"", 8, ""},
		{"plain", 8, "plain"},
		{"a\r\nb\x00c\x7fd\te", 64, "a  b c d e"},
		{"abcdef", 3, "abc"},
		{"\xff\xfe~", 8, "\xff\xfe~"}, // bytes from 0x80 stay
	} {
		if got := Sanitize([]byte(tc.in), tc.n); got != tc.want {
			t.Errorf("Sanitize(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
