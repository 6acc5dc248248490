// Package templates groups error messages by their template: the message
// with its variable parts (IDs, numbers, hosts, quoted values…) replaced by
// <*>. It masks what is obviously variable token by token, then mines the
// rest online in one pass with a fixed-depth prefix tree in the spirit of
// Drain (He et al., ICWS 2017), so that words that vary between messages of
// one kind become <*> too. After the pass, a word that took only a few
// values (a state, an operation) is part of the template again, and one
// that took many stays a variable. Memory is bounded by the number of
// templates.
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
				if j > i && isVerb(f[at+1:]) {
					// A quoted request or statement ("GET /v2/… HTTP/1.1",
					// "SELECT … FROM …") keeps its verb: it says what failed.
					p.tokens = append(p.tokens, token{text: f}, token{text: Wildcard + string(q) + suf, variable: true, spans: j > i+1})
				} else {
					p.tokens = append(p.tokens, token{text: pre + Wildcard + suf, variable: true, spans: j > i})
				}
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

// isVerb: an upper-case word of three letters or more (GET, DELETE,
// SELECT).
func isVerb(s string) bool {
	if len(s) < 3 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

// isSpace is what RE2's \s matches.
func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\f' || r == '\r' }

// openQuote says whether f opens a quoted string, and where the quote is:
// at its start or after an opening bracket, "=", ":" or ","
// ("(\"abc", "name='x", "Pool(host='x'"), never inside a word
// ("customer's").
func openQuote(f string) (rune, int, bool) {
	for i := 0; i < len(f); i++ {
		if c := f[i]; c == '"' || c == '\'' || c == '`' {
			if i > 0 && strings.IndexByte("([{<=:,", f[i-1]) < 0 {
				return 0, 0, false
			}
			return rune(c), i, true
		}
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
// template, and a list of IDs of any length does too. A unit after a
// variable is part of it ("1190 bytes", "<1 sec"), and so is a bracketed
// size or duration right after one ("1190 bytes (1.16 KB)"), a second form
// of the same value that some messages carry and others do not.
func fold(ts []token) []token {
	out := ts[:0]
	for _, t := range ts {
		n := len(out)
		switch {
		case n > 0 && t.variable && out[n-1].variable && bare(out[n-1].text) && bare(t.text):
			out[n-1].text, out[n-1].spans = t.text, true // "<*>, <*>" ends as the last one does
		case n > 0 && !t.variable && out[n-1].variable && strings.HasSuffix(out[n-1].text, Wildcard) && isUnit(t.text):
			out[n-1].text += t.text[len(strings.TrimRight(t.text, unitPunct)):]
			out[n-1].spans = true
			if n > 1 && out[n-2].variable && bare(out[n-2].text) && bracketed(out[n-1]) {
				_, suf, _ := strings.Cut(out[n-1].text[1:], Wildcard)
				out[n-2].text = Wildcard + suf[1:]
				out = out[:n-1]
			}
		default:
			out = append(out, t)
		}
	}
	return out
}

// units are the words of sizes and durations that follow a number.
var units = wordSet("B KB MB GB TB kB KiB MiB GiB TiB kb mb gb byte bytes ns us µs ms s sec secs second seconds min mins minute minutes h hr hrs hour hours day days")

// unitPunct may close a unit ("KB)", "seconds,").
const unitPunct = ")]},;:."

// isUnit: the token is a unit, with closing punctuation after it.
func isUnit(s string) bool { return units[strings.TrimRight(s, unitPunct)] }

// bracketed: the token is a variable in brackets, "(<*>)" or "[<*>],".
func bracketed(t token) bool {
	if !t.variable || len(t.text) < len(Wildcard)+2 {
		return false
	}
	open := strings.IndexByte("([{", t.text[0])
	return open >= 0 && strings.HasPrefix(t.text[1:], Wildcard) && len(t.text) > len(Wildcard)+1 && t.text[len(Wildcard)+1] == ")]}"[open]
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

// cutTrailPunct splits the trailing punctuation off s, keeping at least
// keep bytes.
func cutTrailPunct(s string, keep int) (string, string) {
	i := len(s)
	for i > keep && strings.IndexByte(trailPunct, s[i-1]) >= 0 {
		i--
	}
	return s[:i], s[i:]
}

// maskToken masks one whitespace-free token.
func maskToken(f string) token {
	// key=value: the key stays, the value is variable.
	if k := strings.IndexByte(f, '='); k > 0 && k < len(f)-1 && !strings.Contains(f[k+1:], "=") && isKey(f[:k]) {
		v, suf := cutTrailPunct(f[k+1:], 1)
		// A word stays (user=root): it may be one of a few, which Groups
		// decides; a dotted one is a host or a file name.
		if isVariable(v) || strings.Contains(v, ".") {
			return token{text: f[:k+1] + Wildcard + suf, variable: true}
		}
		return token{text: f}
	}
	if len(f) >= 2 && (f[:2] == "()" || f[:2] == "[]" || f[:2] == "{}") && strings.Trim(f[2:], trailPunct) == "" {
		return token{text: f[:1] + Wildcard + f[1:], variable: true} // an empty value
	}
	pre, core := splitPunct(f)
	core, suf := cutTrailPunct(core, 0)
	// name:value (onExtend:1514038530000, localhost:5432): the name stays.
	if k := strings.IndexByte(core, ':'); k > 0 && k < len(core)-1 && isWord(core[:k]) && !strings.HasPrefix(core[k+1:], "/") && isVariable(core[k+1:]) {
		return token{text: pre + core[:k+1] + Wildcard + suf, variable: true}
	}
	if core != "" && isVariable(core) {
		if m, ok := maskFields(core); ok {
			return token{text: pre + m + suf, variable: true}
		}
		return token{text: pre + Wildcard + suf, variable: true}
	}
	return token{text: f}
}

// fieldSeps separate the fields of a token that packs several
// ("ready=1,policy=3", "cancelNotification,index:3").
const fieldSeps = "=,;|&:()[]{}"

// maskFields masks a token that packs several fields field by field, so
// that its names stay ("ready=<*>,policy=<*>"). It says no when no field
// is a name, or the token is a URL (whose colon is no separator).
func maskFields(core string) (string, bool) {
	if strings.IndexAny(core, fieldSeps) < 0 || strings.Contains(core, "://") {
		return "", false
	}
	var b strings.Builder
	named := false
	for core != "" {
		i := strings.IndexAny(core, fieldSeps)
		if i < 0 {
			i = len(core)
		}
		f := core[:i]
		if f != "" && isVariable(f) {
			b.WriteString(Wildcard)
		} else {
			b.WriteString(f)
			named = named || len(f) > 1 && isWord(strings.Trim(f, "()[]{}"))
		}
		if i < len(core) {
			b.WriteByte(core[i])
			i++
		}
		core = core[i:]
	}
	return b.String(), named
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
var calendarWords = wordSet("Jan Feb Mar Apr May Jun Jul Aug Sep Sept Oct Nov Dec January February March April June July August September October November December Mon Tue Wed Thu Fri Sat Sun Monday Tuesday Wednesday Thursday Friday Saturday Sunday")

// wordSet is a set of the space-separated words.
func wordSet(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// isVariable says whether a token (without surrounding punctuation) is
// obviously variable: it holds a digit (numbers, hex, UUIDs, IPs,
// host:port, durations, timestamps, most IDs), is a long hex string, an
// e-mail address, a path or a URL, a month or weekday name, or holds bytes
// that were not UTF-8.
func isVariable(s string) bool {
	if s == Wildcard || s != "" && s[0] >= 'A' && s[0] <= 'Z' && calendarWords[s] {
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
	return isHostName(s)
}

// topDomains are the last labels that make a dotted lower-case name a
// host ("ns1.example.com", "hooks.partner.io") rather than a package, a
// class or a field path ("com.acme.shop", "order.id").
var topDomains = wordSet("com net org edu gov mil int io info biz co uk de fr jp cn hk tw kr ru br nl au ca eu local internal lan")

// isHostName: s is lower-case labels joined by dots, the last a top
// domain.
func isHostName(s string) bool {
	dot := strings.LastIndexByte(s, '.')
	if dot <= 0 || !topDomains[s[dot+1:]] {
		return false
	}
	for i := 0; i < dot; i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
