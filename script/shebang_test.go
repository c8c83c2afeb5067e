package script

import "testing"

// The shebang line as Redis 7.0 reads it (evalExtractShebangFlags):
// its flags, where the body starts, and Redis's error texts.
func TestParseShebang(t *testing.T) {
	for _, c := range []struct {
		src  string
		f    Flags
		n    int
		text string
	}{
		{"return 1", Flags{}, 0, ""},
		{"#!lua\nreturn 1", Flags{Shebang: true}, 5, ""},
		{"#!lua flags=\nreturn 1", Flags{Shebang: true}, 12, ""},
		{"#!lua flags=no-writes,allow-oom\n", Flags{Shebang: true, NoWrites: true, AllowOOM: true}, 31, ""},
		{"#!lua  flags=allow-stale,no-cluster,allow-cross-slot-keys\n", Flags{Shebang: true, AllowStale: true, NoCluster: true, AllowCrossSlot: true}, 57, ""},
		{"#!lua", Flags{}, 0, "ERR Invalid script shebang"},
		{"#!not-lua\nreturn 1", Flags{}, 0, "ERR Unexpected engine in script shebang: #!not-lua"},
		{"#!lua badger=data\n", Flags{}, 0, "ERR Unknown lua shebang option: badger=data"},
		{"#!lua flags=allow-oom,what?\n", Flags{}, 0, "ERR Unexpected flag in script shebang: what?"},
	} {
		f, n, text := ParseShebang([]byte(c.src))
		if f != c.f || n != c.n || text != c.text {
			t.Errorf("ParseShebang(%q) = %+v, %d, %q; want %+v, %d, %q", c.src, f, n, text, c.f, c.n, c.text)
		}
	}
}
