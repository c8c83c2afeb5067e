package main

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestSplitConfigLine pins redis.conf's quoting (Redis's sdssplitargs) and
// the trailing-comment extension.
func TestSplitConfigLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string // nil with bad: an error
		bad  bool
	}{
		{line: "", want: nil},
		{line: "   # a comment", want: nil},
		{line: "port 6379", want: []string{"port", "6379"}},
		{line: "  port\t6379  \r", want: []string{"port", "6379"}},
		{line: `requirepass "s3cret"     # double quotes are optional`, want: []string{"requirepass", "s3cret"}},
		{line: `protected-mode no        # booleans: yes/no or true/false`, want: []string{"protected-mode", "no"}},
		{line: `requirepass "a b"`, want: []string{"requirepass", "a b"}},
		{line: `requirepass "#not a comment"`, want: []string{"requirepass", "#not a comment"}},
		{line: `requirepass abc#def`, want: []string{"requirepass", "abc#def"}},
		{line: `x "\x41\x4a\n\t\r\"\\\q"`, want: []string{"x", "AJ\n\t\r\"\\q"}},
		{line: `x "\x4g"`, want: []string{"x", "x4g"}},
		{line: `x 'it\'s \n'`, want: []string{"x", `it's \n`}},
		{line: `x ""`, want: []string{"x", ""}},
		{line: `x a"b c"d`, bad: true}, // a closing quote must be followed by a blank
		{line: `x a"b c"`, want: []string{"x", "ab c"}},
		{line: `x "abc`, bad: true},
		{line: `x 'abc`, bad: true},
		{line: `x "abc"def`, bad: true},
		{line: `x "abc\`, bad: true},
	} {
		got, err := splitConfigLine(tc.line)
		if tc.bad {
			if err == nil {
				t.Errorf("splitConfigLine(%q) = %q, want an error", tc.line, got)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("splitConfigLine(%q) = %q, %v; want %q", tc.line, got, err, tc.want)
		}
	}
}

// TestConfigFileLines: each line is one name and one value; anything else
// is refused with the file and line named. Regression: "requirepass
// "s3cret"  # comment" set the password to the whole text after the name,
// and "protected-mode no  # comment" stopped the start.
func TestConfigFileLines(t *testing.T) {
	dir := t.TempDir()
	run := func(body string) (*flag.FlagSet, *string, *bool, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		pass := fs.String("requirepass", "", "")
		pm := fs.Bool("protected-mode", true, "")
		fs.String("addr", "", "")
		path := filepath.Join(dir, "rl.conf")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return fs, pass, pm, applyConfigFile(fs, path)
	}
	_, pass, pm, err := run("protected-mode no        # booleans: yes/no or true/false\nrequirepass \"s3cret\"     # double quotes are optional\n")
	if err != nil || *pass != "s3cret" || *pm {
		t.Errorf("password %q, protected-mode %v, %v; want s3cret, false", *pass, *pm, err)
	}
	for _, body := range []string{"requirepass = 'x y'\n", "requirepass='x y'\n", "requirepass= 'x y'\n", "--requirepass \"x y\"\n"} {
		if _, pass, _, err := run(body); err != nil || *pass != "x y" {
			t.Errorf("%q: password %q, %v; want \"x y\"", body, *pass, err)
		}
	}
	for body, want := range map[string]string{
		"addr a\nrequirepass s3cret extra\n": "rl.conf line 2: wrong number of arguments: requirepass takes one value, the line has 2",
		"requirepass\n":                      "rl.conf line 1: wrong number of arguments: requirepass takes one value, the line has 0",
		"# x\n\nrequirepass \"abc\n":         "rl.conf line 3: unbalanced quotes in configuration line",
		"requirepass 'a'b\n":                 "rl.conf line 1: unbalanced quotes in configuration line",
		"addr = \n":                          "rl.conf line 1: wrong number of arguments: addr takes one value, the line has 0",
		"nosuch 1\n":                         `rl.conf line 1: unknown setting "nosuch"`,
	} {
		_, _, _, err := run(body)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%q: %v; want an error naming the file and %q", body, err, want)
		}
	}
	// A missing file is named.
	missing := filepath.Join(dir, "nope.conf")
	err = applyConfigFile(flag.NewFlagSet("t", flag.ContinueOnError), missing)
	if err == nil || err.Error() != "config file "+missing+": no such file or directory" {
		t.Errorf("missing file: %v", err)
	}
}
