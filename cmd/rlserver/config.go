package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// The config file (--config): redis.conf's syntax.
//
// One setting per line: a flag's name (dashes optional), then exactly one
// value, separated by blanks or by '=' ("name value", "name = value",
// "name=value"). Lines are split into arguments as Redis splits
// redis.conf's lines (sdssplitargs): "..." takes the escapes \n \r \t \b
// \a \xHH and \<any> for that character; '...' takes \' only; a closing
// quote must be followed by a blank or the end of the line; an unclosed
// quote is an error. A line whose first character is '#' is a comment, as
// in Redis. As an extension, an unquoted argument starting with '#' after
// a blank starts a comment to the end of the line (quote a value that
// starts with '#'). Any other count of arguments than a name and one value
// is refused, so a value never silently takes in a comment or a second
// word. Errors name the file and the line.

// errUnbalancedQuotes is sdssplitargs's failure: an unclosed quote, or a
// closing quote followed by something other than a blank.
var errUnbalancedQuotes = errors.New("unbalanced quotes in configuration line")

// splitConfigLine splits one line into arguments with redis.conf's rules,
// stopping at a comment.
func splitConfigLine(line string) ([]string, error) {
	var args []string
	i, n := 0, len(line)
	isBlank := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' }
	for {
		for i < n && isBlank(line[i]) {
			i++
		}
		if i == n {
			return args, nil
		}
		if line[i] == '#' {
			return args, nil // a comment: the line's start, or after a blank
		}
		var cur []byte
		inq, insq := false, false
		for done := false; !done; {
			switch {
			case inq:
				switch {
				case i == n:
					return nil, errUnbalancedQuotes
				case line[i] == '\\' && i+3 < n && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]):
					cur = append(cur, hexVal(line[i+2])<<4|hexVal(line[i+3]))
					i += 3
				case line[i] == '\\' && i+1 < n:
					i++
					c := line[i]
					switch c {
					case 'n':
						c = '\n'
					case 'r':
						c = '\r'
					case 't':
						c = '\t'
					case 'b':
						c = '\b'
					case 'a':
						c = '\a'
					}
					cur = append(cur, c)
				case line[i] == '"':
					if i+1 < n && !isBlank(line[i+1]) {
						return nil, errUnbalancedQuotes
					}
					done = true
				default:
					cur = append(cur, line[i])
				}
			case insq:
				switch {
				case i == n:
					return nil, errUnbalancedQuotes
				case line[i] == '\\' && i+1 < n && line[i+1] == '\'':
					i++
					cur = append(cur, '\'')
				case line[i] == '\'':
					if i+1 < n && !isBlank(line[i+1]) {
						return nil, errUnbalancedQuotes
					}
					done = true
				default:
					cur = append(cur, line[i])
				}
			default:
				switch {
				case i == n || isBlank(line[i]):
					done = true
				case line[i] == '"':
					inq = true
				case line[i] == '\'':
					insq = true
				default:
					cur = append(cur, line[i])
				}
			}
			if i < n {
				i++
			}
		}
		args = append(args, string(cur))
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func hexVal(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// configLine turns a line's arguments into a setting's name and value.
// ok is false for a blank or comment line.
func configLine(line string) (name, value string, ok bool, err error) {
	args, err := splitConfigLine(line)
	if err != nil || len(args) == 0 {
		return "", "", false, err
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
