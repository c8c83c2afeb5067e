package conf

import (
	"errors"
	"strings"
)

// ErrUnbalancedQuotes is the one way a line fails to split: a quote that
// does not close, or a closing quote followed by something other than a
// blank.
var ErrUnbalancedQuotes = errors.New("unbalanced quotes")

// Split splits line into its arguments with Redis's rules (see the package
// comment). A blank line has none.
func Split(line string) ([]string, error) {
	return split(line, false)
}

// SplitComment is Split, except that an argument starting with an unquoted
// '#' (at the start of the line or after a blank) starts a comment, which
// runs to the end of the line and is left out. A quoted "#..." is an
// argument. Redis's redis.conf allows a comment only as a whole line.
func SplitComment(line string) ([]string, error) {
	return split(line, true)
}

func split(line string, comments bool) ([]string, error) {
	if nul := strings.IndexByte(line, 0); nul >= 0 {
		line = line[:nul]
	}
	var args []string
	var cur []byte
	i, n := 0, len(line)
	for {
		for i < n && isSpace(line[i]) {
			i++
		}
		if i == n || comments && line[i] == '#' {
			return args, nil
		}
		cur = cur[:0]
		inq, insq := false, false
	arg:
		for ; ; i++ {
			switch {
			case inq:
				switch {
				case i == n:
					return nil, ErrUnbalancedQuotes
				case line[i] == '\\' && i+3 < n && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]):
					cur = append(cur, unhex(line[i+2])<<4|unhex(line[i+3]))
					i += 3
				case line[i] == '\\' && i+1 < n:
					i++
					cur = append(cur, unescape(line[i]))
				case line[i] == '"':
					if i+1 < n && !isSpace(line[i+1]) {
						return nil, ErrUnbalancedQuotes
					}
					i++
					break arg
				default:
					cur = append(cur, line[i])
				}
			case insq:
				switch {
				case i == n:
					return nil, ErrUnbalancedQuotes
				case line[i] == '\\' && i+1 < n && line[i+1] == '\'':
					i++
					cur = append(cur, '\'')
				case line[i] == '\'':
					if i+1 < n && !isSpace(line[i+1]) {
						return nil, ErrUnbalancedQuotes
					}
					i++
					break arg
				default:
					cur = append(cur, line[i])
				}
			case i == n || isEnd(line[i]):
				break arg
			case line[i] == '"':
				inq = true
			case line[i] == '\'':
				insq = true
			default:
				cur = append(cur, line[i])
			}
		}
		args = append(args, string(cur))
	}
}

// isSpace is C's isspace in the C locale: the blanks skipped before an
// argument and allowed after a closing quote.
func isSpace(c byte) bool {
	return c == ' ' || '\t' <= c && c <= '\r'
}

// isEnd reports the bytes that end an unquoted argument, fewer than
// isSpace's: Redis's list leaves out \v and \f.
func isEnd(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// unescape is the byte a backslash and c stand for inside double quotes.
func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return c
}
