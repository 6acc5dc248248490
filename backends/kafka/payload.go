package kafkadlq

import (
	"unicode/utf8"

	"github.com/dlqctl/dlqctl/envelope"
)

// kafkaPayloadEncoding is envelope.ClassifyPayload for a record value, with a
// faster path for what most dead letters are, compact JSON: one pass of
// a small validator instead of encoding/json's scanner (a function call
// per byte) followed by a second pass for white space. It answers exactly
// what envelope.ClassifyPayload answers; FuzzKafkaPayloadEncoding checks that.
func kafkaPayloadEncoding(p []byte) string {
	if !utf8.Valid(p) {
		return envelope.EncodingBase64
	}
	if len(p) > 0 {
		if end, ok := compactValue(p, 0, 0); ok && end == len(p) {
			return envelope.EncodingJSON
		}
	}
	return envelope.EncodingUTF8
}

// jsonMaxDepth is encoding/json's nesting limit: deeper is not valid JSON
// to it.
const jsonMaxDepth = 10000

// compactValue checks that p[i:] starts with one JSON value without white
// space outside strings, nested at most jsonMaxDepth deep, and returns the
// index after it.
func compactValue(p []byte, i, depth int) (int, bool) {
	if i >= len(p) {
		return i, false
	}
	switch c := p[i]; {
	case c == '{':
		if depth+1 > jsonMaxDepth {
			return i, false
		}
		i++
		if i < len(p) && p[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(p) || p[i] != '"' {
				return i, false
			}
			var ok bool
			if i, ok = compactString(p, i); !ok {
				return i, false
			}
			if i >= len(p) || p[i] != ':' {
				return i, false
			}
			if i, ok = compactValue(p, i+1, depth+1); !ok {
				return i, false
			}
			if i >= len(p) {
				return i, false
			}
			switch p[i] {
			case ',':
				i++
			case '}':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == '[':
		if depth+1 > jsonMaxDepth {
			return i, false
		}
		i++
		if i < len(p) && p[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = compactValue(p, i, depth+1); !ok {
				return i, false
			}
			if i >= len(p) {
				return i, false
			}
			switch p[i] {
			case ',':
				i++
			case ']':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == '"':
		return compactString(p, i)
	case c == '-' || c >= '0' && c <= '9':
		return compactNumber(p, i)
	case c == 't':
		return literal(p, i, "true")
	case c == 'f':
		return literal(p, i, "false")
	case c == 'n':
		return literal(p, i, "null")
	}
	return i, false
}

func literal(p []byte, i int, word string) (int, bool) {
	if len(p)-i < len(word) || string(p[i:i+len(word)]) != word {
		return i, false
	}
	return i + len(word), true
}

// compactString checks the string at p[i] (a '"') and returns the index
// after its closing quote. UTF-8 validity is checked by the caller.
func compactString(p []byte, i int) (int, bool) {
	i++
	for i < len(p) {
		c := p[i]
		switch {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			i++
			if i >= len(p) {
				return i, false
			}
			switch p[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if len(p)-i < 5 {
					return i, false
				}
				for _, h := range p[i+1 : i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return i, false
					}
				}
				i += 5
			default:
				return i, false
			}
		default:
			i++
		}
	}
	return i, false
}

// compactNumber checks the number at p[i]: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func compactNumber(p []byte, i int) (int, bool) {
	digits := func(i int) (int, bool) {
		start := i
		for i < len(p) && p[i] >= '0' && p[i] <= '9' {
			i++
		}
		return i, i > start
	}
	if p[i] == '-' {
		i++
	}
	if i >= len(p) {
		return i, false
	}
	if p[i] == '0' {
		i++
	} else {
		var ok bool
		if i, ok = digits(i); !ok {
			return i, false
		}
	}
	if i < len(p) && p[i] == '.' {
		var ok bool
		if i, ok = digits(i + 1); !ok {
			return i, false
		}
	}
	if i < len(p) && (p[i] == 'e' || p[i] == 'E') {
		i++
		if i < len(p) && (p[i] == '+' || p[i] == '-') {
			i++
		}
		var ok bool
		if i, ok = digits(i); !ok {
			return i, false
		}
	}
	return i, true
}
