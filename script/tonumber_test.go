package script

import "testing"

// TestStr2Number: tonumber reads strings as Lua 5.1 on C's strtod does.
func TestStr2Number(t *testing.T) {
	for s, want := range map[string]float64{
		"1e3": 1000, "1e-05": 1e-05, "1e+20": 1e20, "99999999999999999999": 1e20,
		"-0x10": -16, "0x1p4": 16, " 5 ": 5, "0x10": 16, "10.5": 10.5, "+3": 3,
	} {
		if got, ok := str2number(s); !ok || got != want {
			t.Errorf("%q: %v %v, want %v", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "abc", "1_000", "--1", "1p4", "0b11", "1e", "0x"} {
		if got, ok := str2number(s); ok {
			t.Errorf("%q read as %v", s, got)
		}
	}
	if got, ok := str2number("inf"); !ok || got < 1e308 {
		t.Errorf("inf: %v %v", got, ok)
	}
}
