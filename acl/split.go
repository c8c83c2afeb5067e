package acl

// splitLine splits an ACL file line into arguments with redis-cli's
// quoting: "double quotes" with \n \r \t \b \a \\ \" \xHH escapes,
// 'single quotes' with \' only; a closing quote must be followed by a
// blank or the end of the line. ok is false for unbalanced quotes.
func splitLine(line []byte) (argv [][]byte, ok bool) {
	i := 0
	for {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i == len(line) {
			return argv, true
		}
		var arg []byte
		switch line[i] {
		case '"':
			i++
			for {
				if i >= len(line) {
					return nil, false
				}
				ch := line[i]
				if ch == '\\' && i+3 < len(line) && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]) {
					arg = append(arg, unhex(line[i+2])<<4|unhex(line[i+3]))
					i += 4
					continue
				}
				if ch == '\\' && i+1 < len(line) {
					i++
					switch ch = line[i]; ch {
					case 'n':
						ch = '\n'
					case 'r':
						ch = '\r'
					case 't':
						ch = '\t'
					case 'b':
						ch = '\b'
					case 'a':
						ch = '\a'
					}
					arg = append(arg, ch)
					i++
					continue
				}
				if ch == '"' {
					i++
					if i < len(line) && line[i] != ' ' && line[i] != '\t' {
						return nil, false
					}
					break
				}
				arg = append(arg, ch)
				i++
			}
		case '\'':
			i++
			for {
				if i >= len(line) {
					return nil, false
				}
				ch := line[i]
				if ch == '\\' && i+1 < len(line) && line[i+1] == '\'' {
					arg = append(arg, '\'')
					i += 2
					continue
				}
				if ch == '\'' {
					i++
					if i < len(line) && line[i] != ' ' && line[i] != '\t' {
						return nil, false
					}
					break
				}
				arg = append(arg, ch)
				i++
			}
		default:
			for i < len(line) && line[i] != ' ' && line[i] != '\t' {
				arg = append(arg, line[i])
				i++
			}
		}
		argv = append(argv, arg)
	}
}

func isHex(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F'
}

func unhex(b byte) byte {
	switch {
	case b <= '9':
		return b - '0'
	case b >= 'a':
		return b - 'a' + 10
	}
	return b - 'A' + 10
}
