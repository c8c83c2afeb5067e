package script

import "strconv"

// The compiler cannot be stopped, and gopher-lua's recurses on nesting
// without a bound: 2 MB of '{' overflowed Go's stack and killed the
// process (fatal, past any recover), and long right-associative chains
// ('..') or elseif chains took minutes. Lua 5.1 refuses more than
// LUAI_MAXCCALLS (200) nested syntax levels ("chunk has too many syntax
// levels"): brackets, blocks, and each operator of a right-associative or
// unary chain, which its parser reads by recursion. checkLevels applies
// that limit before compiling, from the tokens alone, counting a level
// only where Lua 5.1 counts at least one (so it refuses nothing Lua
// accepts), and bounds elseif chains, which gopher-lua compiles in
// quadratic time.

const (
	maxSyntaxLevels = 200   // LUAI_MAXCCALLS
	maxElseifs      = 10000 // about a third of a second to compile
)

// checkLevels returns Lua's message for a chunk nested too deeply
// ("<chunk>:<line>: chunk has too many syntax levels"), "" when it is not.
func checkLevels(src, chunk string) string {
	type level struct{ chain int }
	var stack []level
	chain := 0       // right-associative or unary operators in the current chain
	exprEnd := false // the last token can end an expression
	elseifs := 0
	line := 1
	fail := func(msg string) string { return chunk + ":" + strconv.Itoa(line) + ": " + msg }
	push := func() string {
		stack = append(stack, level{chain})
		chain = 0
		if len(stack) > maxSyntaxLevels {
			return fail("chunk has too many syntax levels")
		}
		return ""
	}
	pop := func() {
		if n := len(stack); n > 0 {
			chain = stack[n-1].chain
			stack = stack[:n-1]
		}
	}
	step := func() string {
		chain++
		if len(stack)+chain > maxSyntaxLevels {
			return fail("chunk has too many syntax levels")
		}
		return ""
	}
	// longBracket reports the level of a long bracket at i ("[[", "[=[",
	// ...), -1 when there is none.
	longBracket := func(i int) int {
		if i >= len(src) || src[i] != '[' {
			return -1
		}
		j := i + 1
		for j < len(src) && src[j] == '=' {
			j++
		}
		if j < len(src) && src[j] == '[' {
			return j - i - 1
		}
		return -1
	}
	// skipLong skips a long string or comment of level lv opening at i.
	skipLong := func(i, lv int) int {
		for j := i + lv + 2; j < len(src); j++ {
			switch src[j] {
			case '\n':
				line++
			case ']':
				k := j + 1
				for k < len(src) && src[k] == '=' {
					k++
				}
				if k-j-1 == lv && k < len(src) && src[k] == ']' {
					return k + 1
				}
			}
		}
		return len(src)
	}
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
			continue
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case c == '-' && i+1 < len(src) && src[i+1] == '-':
			if lv := longBracket(i + 2); lv >= 0 {
				i = skipLong(i+2, lv)
			} else {
				for i < len(src) && src[i] != '\n' {
					i++
				}
			}
			continue
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(src) && src[j] != c && src[j] != '\n' {
				if src[j] == '\\' {
					j++
					if j < len(src) && src[j] == '\n' {
						line++
					}
				}
				j++
			}
			i = j + 1
			if exprEnd {
				chain = 0
			}
			exprEnd = true
			continue
		case c == '[' && longBracket(i) >= 0:
			i = skipLong(i, longBracket(i))
			if exprEnd {
				chain = 0
			}
			exprEnd = true
			continue
		case isAlpha(c) || c == '_' || isDigit(c) || (c == '.' && i+1 < len(src) && isDigit(src[i+1])):
			number := isDigit(c) || c == '.'
			j := i + 1 // at least one byte: a number may start with '.'
			for j < len(src) && (isAlpha(src[j]) || src[j] == '_' || isDigit(src[j]) || src[j] == '.' && number) {
				j++
			}
			if number {
				// A number's exponent sign belongs to it.
				for j < len(src) && (src[j] == '+' || src[j] == '-') && (src[j-1] == 'e' || src[j-1] == 'E') {
					j++
					for j < len(src) && (isAlpha(src[j]) || isDigit(src[j]) || src[j] == '.') {
						j++
					}
				}
			}
			word := src[i:j]
			i = j
			var err string
			switch word {
			case "function", "do", "if", "repeat":
				err = push()
				exprEnd = false
			case "end", "until":
				pop()
				exprEnd = word == "end"
			case "elseif":
				elseifs++
				if elseifs > maxElseifs {
					return fail("control structure too long")
				}
				chain, exprEnd = 0, false
			case "not":
				err = step()
				exprEnd = false
			case "and", "or", "local", "return", "then", "else", "in", "for", "while", "break":
				chain, exprEnd = 0, false
			default: // a name, a number, nil, true, false
				if exprEnd {
					chain = 0
				}
				exprEnd = true
			}
			if err != "" {
				return err
			}
			continue
		}
		// Punctuation.
		var err string
		switch c {
		case '(', '{', '[':
			if exprEnd && c != '[' && c != '(' {
				chain = 0
			}
			err = push()
			exprEnd = false
			i++
		case ')', '}', ']':
			pop()
			exprEnd = true
			i++
		case '.':
			switch {
			case i+2 < len(src) && src[i+1] == '.' && src[i+2] == '.':
				exprEnd = true
				i += 3
			case i+1 < len(src) && src[i+1] == '.':
				err = step()
				exprEnd = false
				i += 2
			default:
				exprEnd = false
				i++
			}
		case '^':
			err = step()
			exprEnd = false
			i++
		case '-', '#':
			if !exprEnd {
				err = step() // a unary operator
			}
			exprEnd = false
			i++
		case ',', ';', '=', '<', '>', '~':
			chain, exprEnd = 0, false
			i++
		default: // + * / % : and anything else
			exprEnd = false
			i++
		}
		if err != "" {
			return err
		}
	}
	return ""
}
