package metrics

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLabelSafe(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"user:42", "user:42"},
		{"caf\xc3\xa9", "café"},
		{"a\xffb", `a\xffb`},
		{strings.Repeat("k", 200), strings.Repeat("k", 200)[:128]},
	} {
		got := LabelSafe(c.in)
		if !strings.HasPrefix(got, c.want) || !utf8.ValidString(got) || len(got) > 132 {
			t.Errorf("LabelSafe(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
