// Package templates groups error messages by their template: the message
// with its variable parts (IDs, numbers, hosts, quoted values…) replaced by
// <*>. It masks what is obviously variable token by token, then mines the
// rest online in one pass with a fixed-depth prefix tree in the spirit of
// Drain (He et al., ICWS 2017), so that words that vary between messages of
// one kind become <*> too. Memory is bounded by the number of templates.
package templates

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Wildcard stands for a variable part in a template.
const Wildcard = "<*>"

// MaxErrorBytes bounds what is mined of one error: past it the message is
// cut (at a rune boundary), so one huge error costs no more than a long one.
const MaxErrorBytes = 2048

// maxQuoteTokens bounds how far an opening quote looks for its closing one,
// so a stray quote costs a bounded amount of work.
const maxQuoteTokens = 64

// token is one masked token of a message. Variable tokens are kept as
// prefix + Wildcard + suffix, the prefix and suffix being the punctuation
// around the variable ("(" and ")" of "(score 0.97)").
type token struct {
	text string
	// variable: the masker decided this token is variable.
	variable bool
	// spans: the variable covered whitespace (a quoted string with spaces,
	// or a run of variables folded into one).
	spans bool
}

// Prepared is a message ready for mining: cut to MaxErrorBytes, made valid
// UTF-8, and masked.
type Prepared struct {
	tokens []token
	// Cut says the message was longer than MaxErrorBytes.
	Cut bool
}

// Tokens returns the masked tokens.
func (p Prepared) Tokens() []string {
	out := make([]string, len(p.tokens))
	for i, t := range p.tokens {
		out[i] = t.text
	}
	return out
}

// Prepare cuts, cleans and masks one error message.
func Prepare(msg string) Prepared {
	var p Prepared
	if len(msg) > MaxErrorBytes {
		cut := MaxErrorBytes
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg, p.Cut = msg[:cut], true
	}
	if !utf8.ValidString(msg) {
		msg = strings.ToValidUTF8(msg, "\uFFFD")
	}
	// Split where a regular expression's \s would, so that a rule made
	// from the template (Pattern) sees the same tokens.
	fields := strings.FieldsFunc(msg, isSpace)
	p.tokens = make([]token, 0, len(fields))
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		// A quoted string is one variable, spaces and all.
		if q, at, ok := openQuote(f); ok {
			if j, ok := closeQuote(fields, i, at); ok {
				pre := f[:at]
				last := fields[j]
				suf := last[strings.LastIndexByte(last, byte(q))+1:]
				if j == i && strings.IndexByte(f[at+1:], byte(q)) >= 0 {
					suf = f[at+1+strings.IndexByte(f[at+1:], byte(q))+1:]
				}
				p.tokens = append(p.tokens, token{text: pre + Wildcard + suf, variable: true, spans: j > i})
				i = j
				continue
			}
		}
		p.tokens = append(p.tokens, maskToken(f))
	}
	if p.Cut && len(p.tokens) > 1 {
		// The cut may have fallen inside the last token: it says nothing.
		p.tokens = p.tokens[:len(p.tokens)-1]
	}
	p.tokens = fold(p.tokens)
	return p
}

// isSpace is what RE2's \s matches.
func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\f' || r == '\r' }

// openQuote says whether f opens a quoted string, after leading brackets
// or a key= ("(\"abc", "name='x"), and where the quote is.
func openQuote(f string) (rune, int, bool) {
	i := 0
	for i < len(f) && strings.IndexByte("([{<", f[i]) >= 0 {
		i++
	}
	if k := strings.IndexByte(f[i:], '='); k > 0 && isKey(f[i:i+k]) {
		i += k + 1
	}
	if i < len(f) && strings.IndexByte("\"'`", f[i]) >= 0 {
		return rune(f[i]), i, true
	}
	return 0, 0, false
}

func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// closeQuote finds the field, from i on, where the quote that opens at
// fields[i][at] closes.
func closeQuote(fields []string, i, at int) (int, bool) {
	q := fields[i][at]
	if strings.IndexByte(fields[i][at+1:], q) >= 0 {
		return i, true
	}
	for j := i + 1; j < len(fields) && j <= i+maxQuoteTokens; j++ {
		if strings.IndexByte(fields[j], q) >= 0 {
			return j, true
		}
	}
	return 0, false
}

// fold merges runs of tokens that are nothing but a variable into one, so
// that a timestamp written as two tokens and one written as one give one
// template, and a list of IDs of any length does too.
func fold(ts []token) []token {
	out := ts[:0]
	for _, t := range ts {
		if n := len(out); n > 0 && t.variable && out[n-1].variable && bare(out[n-1].text) && bare(t.text) {
			out[n-1].text, out[n-1].spans = t.text, true // "<*>, <*>" ends as the last one does
			continue
		}
		out = append(out, t)
	}
	return out
}

// bare: the token is the wildcard with at most a comma after it.
func bare(s string) bool { return s == Wildcard || s == Wildcard+"," }

// splitPunct splits leading punctuation off s.
func splitPunct(s string) (string, string) {
	i := 0
	for i < len(s) && strings.IndexByte("([{<\"'`", s[i]) >= 0 {
		i++
	}
	return s[:i], s[i:]
}

// trailing punctuation that is kept outside a variable.
const trailPunct = ")]}>,;:.!?\"'`"

// maskToken masks one whitespace-free token.
func maskToken(f string) token {
	// key=value: the key stays, the value is variable.
	if k := strings.IndexByte(f, '='); k > 0 && k < len(f)-1 && !strings.Contains(f[k+1:], "=") && isKey(f[:k]) {
		v := f[k+1:]
		suf := ""
		for len(v) > 1 && strings.IndexByte(trailPunct, v[len(v)-1]) >= 0 {
			suf = v[len(v)-1:] + suf
			v = v[:len(v)-1]
		}
		return token{text: f[:k+1] + Wildcard + suf, variable: true}
	}
	pre, core := splitPunct(f)
	suf := ""
	for len(core) > 0 && strings.IndexByte(trailPunct, core[len(core)-1]) >= 0 {
		suf = core[len(core)-1:] + suf
		core = core[:len(core)-1]
	}
	// name:value (onExtend:1514038530000, localhost:5432): the name stays.
	if k := strings.IndexByte(core, ':'); k > 0 && k < len(core)-1 && isWord(core[:k]) && !strings.HasPrefix(core[k+1:], "/") && isVariable(core[k+1:]) {
		return token{text: pre + core[:k+1] + Wildcard + suf, variable: true}
	}
	if core != "" && isVariable(core) {
		return token{text: pre + Wildcard + suf, variable: true}
	}
	return token{text: f}
}

// isWord: letters, underscores and inner dashes only.
func isWord(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' && i > 0) {
			return false
		}
	}
	return true
}

func isKey(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isWordByte(s[i]) && s[i] != '.' && s[i] != '-' {
			return false
		}
	}
	return true
}

// calendarWords are the month and weekday names of timestamps.
var calendarWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields("Jan Feb Mar Apr May Jun Jul Aug Sep Sept Oct Nov Dec January February March April June July August September October November December Mon Tue Wed Thu Fri Sat Sun Monday Tuesday Wednesday Thursday Friday Saturday Sunday") {
		m[w] = true
	}
	return m
}()

// isVariable says whether a token (without surrounding punctuation) is
// obviously variable: it holds a digit (numbers, hex, UUIDs, IPs,
// host:port, durations, timestamps, most IDs), is a long hex string, an
// e-mail address, a path or a URL, a month or weekday name, or holds bytes
// that were not UTF-8.
func isVariable(s string) bool {
	if s == Wildcard || calendarWords[s] {
		return true
	}
	hex := len(s) >= 8
	slashes := 0
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			return true
		case r == '/' || r == '\\':
			slashes++
		case r == utf8.RuneError:
			return true
		}
		if hex && !unicode.Is(unicode.ASCII_Hex_Digit, r) {
			hex = false
		}
	}
	if hex {
		return true
	}
	if strings.Contains(s, "://") || slashes >= 2 || (slashes == 1 && (s[0] == '/' || s[0] == '~' || strings.HasPrefix(s, "./"))) && len(s) > 1 {
		return true
	}
	if at := strings.IndexByte(s, '@'); at > 0 && at < len(s)-1 {
		return true
	}
	return false
}
