package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
