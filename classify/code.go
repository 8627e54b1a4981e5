package classify

// CodeMaxBytes bounds Verdict.Code. Vendor codes are short slugs
// ("rate_limit_exceeded", "RESOURCE_EXHAUSTED"); anything longer is a body
// echoed into the field, and the code travels into logs, River's errors,
// dead letters, alert keys and metric labels.
const CodeMaxBytes = 64

// boundCode keeps a vendor code to at most CodeMaxBytes of letters, digits
// and . _ - : / ; every other byte becomes _. Pure, like the rest.
func boundCode(v Verdict) Verdict {
	if v.Code == nil || isSafeCode(*v.Code) {
		return v // the common case: a vendor slug, kept as it is, no copy
	}
	b := []byte(*v.Code)
	if len(b) > CodeMaxBytes {
		b = b[:CodeMaxBytes]
	}
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == '-', c == ':', c == '/':
		default:
			b[i] = '_'
		}
	}
	s := string(b)
	v.Code = &s
	return v
}

// isSafeCode reports whether code is already within boundCode's rules.
func isSafeCode(code string) bool {
	if len(code) > CodeMaxBytes {
		return false
	}
	for i := 0; i < len(code); i++ {
		switch c := code[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == '-', c == ':', c == '/':
		default:
			return false
		}
	}
	return true
}
