package policy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// A policy file has one policy per line, its words separated by spaces or
// tabs: `name KIND params...`, as RL.POLICY SET takes them. Blank lines
// and lines whose first non-blank character is '#' are ignored. A file is
// taken whole or not at all: the first bad line makes ParseFile fail with
// a *LineError naming it, and the caller keeps the policies in force.

// MaxFileSize bounds a policy file (MaxPolicies lines of about 100 bytes).
const MaxFileSize = 4 << 20

// maxLine bounds one line of a policy file.
const maxLine = 4096

// ErrFileTooLarge means a policy file exceeds MaxFileSize.
var ErrFileTooLarge = errors.New("policy file too large")

// ErrLineTooLong means a line of a policy file exceeds 4096 bytes.
var ErrLineTooLong = errors.New("line too long")

// ParseFile reads and parses the policy file at path.
func ParseFile(path string) ([]*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("policy file %s: %w (more than %d bytes)", path, ErrFileTooLarge, MaxFileSize)
	}
	return Read(path, b)
}

// Read parses a policy file's contents; name is the file's name in
// errors.
func Read(name string, b []byte) ([]*Policy, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1024), maxLine)
	var ps []*Policy
	seen := map[string]int{}
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		p, err := Parse(strings.Fields(text))
		if err != nil {
			return nil, &LineError{File: name, Line: line, Err: err}
		}
		if first, dup := seen[p.Name]; dup {
			return nil, &LineError{File: name, Line: line, Err: fmt.Errorf("%w: %q is also defined on line %d", ErrDuplicate, p.Name, first)}
		}
		if len(ps) >= MaxPolicies {
			return nil, &LineError{File: name, Line: line, Err: fmt.Errorf("%w: at most %d", ErrTooMany, MaxPolicies)}
		}
		seen[p.Name] = line
		ps = append(ps, p)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = ErrLineTooLong
		}
		return nil, &LineError{File: name, Line: line + 1, Err: err}
	}
	return ps, nil
}
