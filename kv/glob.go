package kv

import "strings"

// glob is Redis's glob match (*, ?, [...] with ranges and ^, \ escapes),
// for SCAN's MATCH on values: the same algorithm as acl.Glob, which kv
// may not import (internal/layout), backtracking only to the last star so
// a pattern costs O(len(pattern)*len(s)) steps.
func glob(pattern string, s []byte) bool {
	p, i := 0, 0
	starP, starI := -1, 0 // after the last star seen, and where its match ends
	for i < len(s) || p < len(pattern) {
		if p < len(pattern) {
			if pattern[p] == '*' {
				for p < len(pattern) && pattern[p] == '*' {
					p++
				}
				if p == len(pattern) {
					return true
				}
				starP, starI = p, i
				continue
			}
			if i < len(s) {
				switch c := pattern[p]; c {
				case '?', '[', '\\':
					if n := globOne(pattern[p:], s[i]); n > 0 {
						p += n
						i++
						continue
					}
				default:
					if c == s[i] {
						p++
						i++
						continue
					}
				}
			}
		}
		// Mismatch: let the last star take one more byte and retry.
		if starP < 0 || starI >= len(s) {
			return false
		}
		starI++
		p, i = starP, starI
	}
	return true
}

// globOne matches c against the single-byte token at the start of pattern
// (not a star) and returns the token's length, or 0 when c does not match.
// An unterminated [ matches nothing.
func globOne(pattern string, c byte) int {
	switch pattern[0] {
	case '?':
		return 1
	case '[':
		end := strings.IndexByte(pattern[1:], ']')
		if end < 0 {
			return 0
		}
		class := pattern[1 : 1+end]
		neg := strings.HasPrefix(class, "^")
		if neg {
			class = class[1:]
		}
		match := false
		for k := 0; k < len(class); k++ {
			if k+2 < len(class) && class[k+1] == '-' {
				if class[k] <= c && c <= class[k+2] {
					match = true
				}
				k += 2
			} else if class[k] == c {
				match = true
			}
		}
		if match == neg {
			return 0
		}
		return 2 + end
	case '\\':
		if len(pattern) > 1 {
			if pattern[1] == c {
				return 2
			}
			return 0
		}
	}
	if pattern[0] == c {
		return 1
	}
	return 0
}
