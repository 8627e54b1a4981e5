package classify

// validJSON reports whether s is one JSON value that encoding/json accepts
// (json.Valid): one value with optional surrounding white space, strings
// without raw control characters and with only the escapes JSON defines
// (invalid UTF-8 is accepted, as encoding/json does), numbers in JSON's
// grammar, and nesting no deeper than encoding/json's 10000 levels.
//
// It replaces gjson.Valid on the Classify path: a body is mostly string
// bytes, and this scans them eight at a time (plainRun), which cut the
// validating pass by about two thirds on BenchmarkClassify's body.
// FuzzValidJSONMatchesEncodingJSON checks it against json.Valid.
func validJSON(s string) bool {
	i, ok := validValue(s, skipSpace(s, 0), 0)
	return ok && skipSpace(s, i) == len(s)
}

const maxNestingDepth = 10000 // encoding/json's limit

// validValue validates the value at s[i] at nesting depth depth and returns
// the index just past it.
func validValue(s string, i, depth int) (int, bool) {
	if i >= len(s) {
		return i, false
	}
	switch c := s[i]; {
	case c == '"':
		return validString(s, i)
	case c == '{':
		if depth++; depth > maxNestingDepth {
			return i, false
		}
		i = skipSpace(s, i+1)
		if i < len(s) && s[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(s) || s[i] != '"' {
				return i, false
			}
			var ok bool
			if i, ok = validString(s, i); !ok {
				return i, false
			}
			i = skipSpace(s, i)
			if i >= len(s) || s[i] != ':' {
				return i, false
			}
			if i, ok = validValue(s, skipSpace(s, i+1), depth); !ok {
				return i, false
			}
			i = skipSpace(s, i)
			if i >= len(s) {
				return i, false
			}
			switch s[i] {
			case ',':
				i = skipSpace(s, i+1)
			case '}':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == '[':
		if depth++; depth > maxNestingDepth {
			return i, false
		}
		i = skipSpace(s, i+1)
		if i < len(s) && s[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = validValue(s, i, depth); !ok {
				return i, false
			}
			i = skipSpace(s, i)
			if i >= len(s) {
				return i, false
			}
			switch s[i] {
			case ',':
				i = skipSpace(s, i+1)
			case ']':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == 't':
		return validLiteral(s, i, "true")
	case c == 'f':
		return validLiteral(s, i, "false")
	case c == 'n':
		return validLiteral(s, i, "null")
	case c == '-' || c >= '0' && c <= '9':
		return validNumber(s, i)
	}
	return i, false
}

func validLiteral(s string, i int, lit string) (int, bool) {
	if len(s)-i < len(lit) || s[i:i+len(lit)] != lit {
		return i, false
	}
	return i + len(lit), true
}

// validNumber validates -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(s string, i int) (int, bool) {
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = digits(s, i+1)
	default:
		return i, false
	}
	if i < len(s) && s[i] == '.' {
		j := digits(s, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := digits(s, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func digits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// validString validates the string that opens at s[i] and returns the index
// just past its closing quote.
func validString(s string, i int) (int, bool) {
	for i++; ; {
		i = plainRun(s, i)
		if i >= len(s) {
			return i, false
		}
		switch c := s[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(s) {
				return i, false
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(s)-i < 6 || !isHex(s[i+2]) || !isHex(s[i+3]) || !isHex(s[i+4]) || !isHex(s[i+5]) {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		default: // a control character
			return i, false
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// plainRun returns the index of the first byte at or after i that ends a run
// of plain string bytes: a quote, a backslash or a control character (below
// 0x20). It tests eight bytes at a time: a word with none of them is skipped
// whole.
func plainRun(s string, i int) int {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	for ; i+8 <= len(s); i += 8 {
		t := s[i : i+8] // one bounds check; the loads below combine into one
		w := uint64(t[0]) | uint64(t[1])<<8 | uint64(t[2])<<16 | uint64(t[3])<<24 |
			uint64(t[4])<<32 | uint64(t[5])<<40 | uint64(t[6])<<48 | uint64(t[7])<<56
		q := w ^ ('"' * ones)
		b := w ^ ('\\' * ones)
		// A byte is flagged when it is zero after the xor (a quote or a
		// backslash) or below 0x20; bytes with the high bit set (UTF-8) are
		// plain, which the final &^w keeps out of the below-0x20 test.
		if ((q-ones)&^q|(b-ones)&^b|(w-0x20*ones)&^w)&highs != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c < 0x20 {
			return i
		}
	}
	return i
}
