package conf

import (
	"errors"
	"reflect"
	"testing"
)

// splitCases are lines with the arguments Redis's sdssplitargs gives them,
// or bad when it refuses them (it returns NULL).
var splitCases = []struct {
	line string
	want []string
	bad  bool
}{
	// Blanks.
	{line: "", want: nil},
	{line: " \t\v\f\r\n", want: nil},
	{line: "port 6379", want: []string{"port", "6379"}},
	{line: "  port\t6379  \r", want: []string{"port", "6379"}},
	{line: "\v\fport 6379", want: []string{"port", "6379"}}, // isspace before an argument
	{line: "a\vb a\fb", want: []string{"a\vb", "a\fb"}},     // \v and \f do not end one
	{line: "a\nb\rc", want: []string{"a", "b", "c"}},
	{line: "a\x00b c", want: []string{"a"}}, // NUL ends the C string
	{line: "\"a\x00b\"", bad: true},
	{line: "\xc3\xa9t\xc3\xa9 \xa0x", want: []string{"\xc3\xa9t\xc3\xa9", "\xa0x"}}, // bytes, not runes
	// Comments are the caller's: Split keeps '#'.
	{line: "# a comment", want: []string{"#", "a", "comment"}},
	{line: "requirepass abc#def", want: []string{"requirepass", "abc#def"}},
	// Double quotes.
	{line: `requirepass "a b"`, want: []string{"requirepass", "a b"}},
	{line: `x ""`, want: []string{"x", ""}},
	{line: `x "\x41\x4a\x4b\xff\x00z"`, want: []string{"x", "AJK\xff\x00z"}},
	{line: `x "\n\r\t\b\a\\\"\q\'"`, want: []string{"x", "\n\r\t\b\a\\\"q'"}},
	{line: `x "\x4g"`, want: []string{"x", "x4g"}},
	{line: `x "\x4"`, want: []string{"x", "x4"}},
	{line: `x "a'b"`, want: []string{"x", "a'b"}},
	{line: "x \"a\tb\"\tc", want: []string{"x", "a\tb", "c"}},
	{line: "x \"a\"\v", want: []string{"x", "a"}}, // isspace after a closing quote
	{line: `x "abc`, bad: true},
	{line: `x "abc\`, bad: true},
	{line: `x "abc\"`, bad: true},
	{line: `x "abc"def`, bad: true},
	{line: `x "a""b"`, bad: true},
	// Single quotes.
	{line: `x 'it\'s \n \x41 \\ \"'`, want: []string{"x", `it's \n \x41 \\ \"`}},
	{line: `x 'a\\'`, bad: true}, // \' is \ then an escaped quote
	{line: `x 'a"b'`, want: []string{"x", `a"b`}},
	{line: `x ''`, want: []string{"x", ""}},
	{line: `x 'abc`, bad: true},
	{line: `x 'abc\'`, bad: true},
	{line: `x 'a'b`, bad: true},
	// A quote opening in an unquoted argument.
	{line: `x a"b c"`, want: []string{"x", "ab c"}},
	{line: `x a'b c' d`, want: []string{"x", "ab c", "d"}},
	{line: `x a"b c"d`, bad: true},
	{line: `x a"b`, bad: true},
	{line: `user alice on ">pass word" ~cache:* +@all`, want: []string{"user", "alice", "on", ">pass word", "~cache:*", "+@all"}},
}

// TestSplit: Split gives the arguments Redis gives, and refuses what Redis
// refuses.
func TestSplit(t *testing.T) {
	for _, tc := range splitCases {
		got, err := Split(tc.line)
		if tc.bad {
			if !errors.Is(err, ErrUnbalancedQuotes) {
				t.Errorf("Split(%q) = %q, %v; want ErrUnbalancedQuotes", tc.line, got, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Split(%q) = %q, %v; want %q", tc.line, got, err, tc.want)
		}
	}
}

// TestSplitComment: an unquoted argument starting with '#' ends the line,
// quoted or inside an argument it does not; quotes in a comment are not
// read. Regression: "requirepass "s3cret"  # comment" set the password to
// the whole text after the name.
func TestSplitComment(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
		bad  bool
	}{
		{line: "# a comment", want: nil},
		{line: "   #port 6379", want: nil},
		{line: `requirepass "s3cret"     # double quotes are optional`, want: []string{"requirepass", "s3cret"}},
		{line: "protected-mode no\t# it's a comment: quotes \"are not read", want: []string{"protected-mode", "no"}},
		{line: `requirepass "#not a comment"`, want: []string{"requirepass", "#not a comment"}},
		{line: `requirepass '#not a comment'`, want: []string{"requirepass", "#not a comment"}},
		{line: `requirepass abc#def`, want: []string{"requirepass", "abc#def"}},
		{line: `requirepass "abc"#def`, bad: true},
		{line: `x "abc # def`, bad: true},
	} {
		got, err := SplitComment(tc.line)
		if tc.bad {
			if !errors.Is(err, ErrUnbalancedQuotes) {
				t.Errorf("SplitComment(%q) = %q, %v; want ErrUnbalancedQuotes", tc.line, got, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SplitComment(%q) = %q, %v; want %q", tc.line, got, err, tc.want)
		}
	}
	// Without a '#', SplitComment is Split.
	for _, tc := range splitCases {
		a, errA := Split(tc.line)
		b, errB := SplitComment(tc.line)
		if tc.line != "# a comment" && (!reflect.DeepEqual(a, b) || errA != errB) {
			t.Errorf("SplitComment(%q) = %q, %v; Split gives %q, %v", tc.line, b, errB, a, errA)
		}
	}
}
