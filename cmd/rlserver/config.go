package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/rlserver/rlserver/internal/conf"
)

// The config file (--config): redis.conf's syntax.
//
// One setting per line: a flag's name (dashes optional), then exactly one
// value, separated by blanks or by '=' ("name value", "name = value",
// "name=value"). Lines are split into arguments as Redis splits
// redis.conf's lines (sdssplitargs, package internal/conf: quotes,
// escapes, an unclosed quote is an error). A line whose first character is
// '#' is a comment, as in Redis. As an extension, an unquoted argument
// starting with '#' after a blank starts a comment to the end of the line
// (quote a value that starts with '#'). Any other count of arguments than
// a name and one value is refused, so a value never silently takes in a
// comment or a second word. Errors name the file and the line.

// configLine turns a line's arguments into a setting's name and value.
// ok is false for a blank or comment line.
func configLine(line string) (name, value string, ok bool, err error) {
	args, err := conf.SplitComment(line)
	if err != nil {
		return "", "", false, fmt.Errorf("%w in configuration line", err) // Redis's words
	}
	if len(args) == 0 {
		return "", "", false, nil
	}
	name = args[0]
	// "name=value", "name= value" and "name = value": a name never holds
	// '=', and an unquoted "=" alone as the second argument is the
	// separator.
	if k, v, cut := strings.Cut(name, "="); cut {
		name = k
		rest := args[1:]
		args = []string{k}
		if v != "" {
			args = append(args, v)
		}
		args = append(args, rest...)
	} else if len(args) > 1 && args[1] == "=" {
		args = append(args[:1], args[2:]...)
	}
	name = strings.TrimLeft(name, "-")
	if len(args) != 2 {
		return name, "", true, fmt.Errorf("wrong number of arguments: %s takes one value, the line has %d (quote a value that holds blanks or starts with '#')", name, len(args)-1)
	}
	return name, args[1], true, nil
}

// applyConfigFile sets the flags named in the config file. It runs before
// the environment and the command line are applied, so both override it.
// Booleans also take yes/no, as in redis.conf.
func applyConfigFile(fs *flag.FlagSet, path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("config file %s: %v", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for line := 1; sc.Scan(); line++ {
		name, value, ok, err := configLine(sc.Text())
		if err != nil {
			return fmt.Errorf("config file %s line %d: %v", path, line, err)
		}
		if !ok {
			continue
		}
		fl := fs.Lookup(name)
		if fl == nil || name == "config" || name == "healthcheck" || name == "version" {
			return fmt.Errorf("config file %s line %d: unknown setting %q", path, line, name)
		}
		if err := fl.Value.Set(boolWord(fl, value)); err != nil {
			return fmt.Errorf("config file %s line %d: invalid value %q for %s: %v", path, line, value, name, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("config file %s: %v", path, err)
	}
	return nil
}
