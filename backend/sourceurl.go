package backend

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The preamble every backend's source URL shares: the scheme, the user
// info, and a query of known keys given once each. What follows the user
// info (one host, a seed list, a vhost, a database) is the backend's own.

// SourceURL is a source URL cut into its parts by hand: url.Parse refuses a
// seed list of hosts (h1:9092,h2:9093), and its errors quote the whole URL,
// password included.
type SourceURL struct {
	Scheme string
	// User and Password are percent-decoded. HasUser says the URL has user
	// info (an "@" before the hosts), HasPassword a ":" in it.
	User, Password       string
	HasUser, HasPassword bool
	// Hosts is what follows the user info up to the path or query, as
	// written: host[:port] or a comma-separated seed list (and the path
	// too when the split was asked for none).
	Hosts string
	// Path is from the first "/" after the hosts up to the query, as
	// written, when the split was asked for one; "" when none.
	Path string
	// RawQuery is the query as written, without its "?".
	RawQuery string
}

// SplitSourceURL cuts raw into a SourceURL when its scheme is one of
// schemes; ok is false when it is not (the caller says which URL it
// wants). The user info ends at the last "@" before the query, so a
// password must escape "?" but may hold ":" or "@"; it may hold "/" too
// unless withPath, where the first "/" starts the path (a RabbitMQ vhost
// may hold an "@"). Its error (bad percent-escaping) quotes nothing of
// the URL.
func SplitSourceURL(raw string, schemes []string, withPath bool) (u SourceURL, ok bool, err error) {
	scheme, rest, found := strings.Cut(raw, "://")
	if !found || !slices.Contains(schemes, scheme) {
		return u, false, nil
	}
	u.Scheme = scheme
	u.Hosts, u.RawQuery, _ = strings.Cut(rest, "?")
	if withPath {
		if i := strings.Index(u.Hosts, "/"); i >= 0 {
			u.Hosts, u.Path = u.Hosts[:i], u.Hosts[i:]
		}
	}
	at := strings.LastIndex(u.Hosts, "@")
	if at < 0 {
		return u, true, nil
	}
	info := u.Hosts[:at]
	u.Hosts, u.HasUser = u.Hosts[at+1:], true
	user, pass, hasPass := strings.Cut(info, ":")
	if u.User, err = url.PathUnescape(user); err != nil {
		return u, true, fmt.Errorf("the user name is badly escaped (use %%XX for special characters)")
	}
	if hasPass {
		if u.Password, err = url.PathUnescape(pass); err != nil {
			return u, true, fmt.Errorf("the password is badly escaped (use %%XX for special characters)")
		}
		u.HasPassword = true
	}
	return u, true, nil
}

// StrayAt says raw holds an "@" that its user info (hasUser: the parse
// found some) does not account for: a password with an unescaped "/",
// "?" or "#" may then have run into the hosts, path or query.
func StrayAt(raw string, hasUser bool) bool {
	accounted := 0
	if hasUser {
		accounted = 1
	}
	return strings.Count(raw, "@") > accounted
}

const notShown = "(not shown: the URL has an '@' after its user info; escape '@', '/', '?' and '#' in a password as %XX)"

// QuoteURLPiece quotes a piece of raw (a host, a path, a query key or
// value) for an error, unless StrayAt: then any piece may hold part of a
// password, and none is shown.
func QuoteURLPiece(raw string, hasUser bool, piece string) string {
	if StrayAt(raw, hasUser) {
		return notShown
	}
	return strconv.Quote(piece)
}

// URLForError is raw as an error about it may show it: the user info
// hidden (RedactUserinfo) and the query and fragment left out. A query
// value may be anything — a secret under a mistyped key (passwrod=) among
// others — so an error names the key it is about, never a value. An "@"
// after the first "?" or "#" is a password holding one of them, or a
// query value holding an "@": as what follows it cannot be told to be a
// host, only the scheme is shown.
func URLForError(raw string) string {
	head, tail := raw, ""
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		head, tail = raw[:i], raw[i:]
	}
	if strings.Contains(tail, "@") {
		if scheme, _, ok := strings.Cut(head, "://"); ok {
			return scheme + "://" + Redacted
		}
		return Redacted
	}
	return RedactUserinfo(head)
}

// maskedValue stands for a query value in an error.
const maskedValue = Redacted

// UserinfoDisplay is the user info as dlqctl shows it: "user:xxxxx@" with
// a password, "user@" without, "" for none. The password is never shown,
// only that there is one.
func UserinfoDisplay(user string, hasPassword bool) string {
	switch {
	case hasPassword:
		return url.UserPassword(user, Redacted).String() + "@"
	case user != "":
		return url.User(user).String() + "@"
	}
	return ""
}

// URLQuery is a source URL's query once every key is known and given at
// most once. Its getters read an option into a field and keep the first
// bad value's error, so a parser reads all its options and checks Err
// once; each error names the key and says what it wants, and never shows
// a value (key=xxxxx): whatever was typed there may be a secret.
type URLQuery struct {
	vals url.Values
	// hide: the URL may hold part of a password anywhere (StrayAt).
	hide bool
	err  error
}

// quote shows a key in an error, unless hide.
func (q *URLQuery) quote(key string) string {
	if q.hide {
		return notShown
	}
	return strconv.Quote(key)
}

// mask stands for a value in an error.
func (q *URLQuery) mask() string {
	if q.hide {
		return notShown
	}
	return maskedValue
}

// ParseURLQuery parses raw (a query without its "?") and refuses an
// unknown key, naming the known ones, and a key given twice. Keys are
// checked in sorted order, so the error for a URL is always the same.
// No error shows a value. hide (StrayAt of the URL) keeps the keys out
// of the errors too, the getters' included: part of a password may be
// in any of them.
func ParseURLQuery(raw string, known []string, hide bool) (*URLQuery, error) {
	q := &URLQuery{hide: hide}
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return nil, fmt.Errorf("bad query string: %s", badQuery(raw, q.quote))
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(known, k) {
			sorted := slices.Sorted(slices.Values(known))
			return nil, fmt.Errorf("unknown query parameter %s (known: %s)", q.quote(k), strings.Join(sorted, ", "))
		}
		if n := len(vals[k]); n > 1 {
			return nil, fmt.Errorf("query parameter %s given %d times", q.quote(k), n)
		}
	}
	q.vals = vals
	return q, nil
}

// badQuery says what in raw, a query url.ParseQuery refused, is wrong,
// naming at most a key (through quote): url.ParseQuery's own error
// quotes the bad escape, a piece of a value.
func badQuery(raw string, quote func(string) string) string {
	for _, part := range strings.Split(raw, "&") {
		key, val, _ := strings.Cut(part, "=")
		k, err := url.QueryUnescape(key)
		switch {
		case strings.Contains(key, ";"):
			return "a ';' in a parameter's name (separate parameters with '&')"
		case err != nil:
			return "a parameter's name is badly escaped (write a literal '%' as %25)"
		case strings.Contains(val, ";"):
			return fmt.Sprintf("a ';' in the value of %s (separate parameters with '&'; write a literal ';' as %%3B)", quote(k))
		}
		if _, err := url.QueryUnescape(val); err != nil {
			return fmt.Sprintf("the value of %s is badly escaped (write a literal '%%' as %%25)", quote(k))
		}
	}
	return "it does not parse"
}

// Has says whether the query gives key, empty or not.
func (q *URLQuery) Has(key string) bool { _, ok := q.vals[key]; return ok }

// Get is key's value, "" when not given.
func (q *URLQuery) Get(key string) string { return q.vals.Get(key) }

// Err is the first bad value a getter met, nil if none.
func (q *URLQuery) Err() error { return q.err }

// Fail records a bad value of key that a backend checks itself:
// `key=xxxxx: want …`, the value masked.
func (q *URLQuery) Fail(key, want string) {
	if q.err == nil {
		q.err = fmt.Errorf("%s=%s: want %s", key, q.mask(), want)
	}
}

// Failf records a backend's own error about the query.
func (q *URLQuery) Failf(format string, args ...any) {
	if q.err == nil {
		q.err = fmt.Errorf(format, args...)
	}
}

// Bool sets *to from key when given ("true", "false", "1", "0", …).
func (q *URLQuery) Bool(key string, to *bool) {
	if !q.Has(key) {
		return
	}
	b, err := strconv.ParseBool(q.Get(key))
	if err != nil {
		q.Fail(key, "true or false")
		return
	}
	*to = b
}

// Duration sets *to from key when given; it must be positive.
func (q *URLQuery) Duration(key string, to *time.Duration) {
	if !q.Has(key) {
		return
	}
	d, err := time.ParseDuration(q.Get(key))
	if err != nil || d <= 0 {
		q.Fail(key, "a positive duration such as 10s")
		return
	}
	*to = d
}

// Int sets *to from key when given; it must be a whole number from lo to hi.
func (q *URLQuery) Int(key string, lo, hi int, to *int) {
	if !q.Has(key) {
		return
	}
	n, err := strconv.Atoi(q.Get(key))
	if err != nil || n < lo || n > hi {
		q.Fail(key, fmt.Sprintf("a whole number from %d to %d", lo, hi))
		return
	}
	*to = n
}

// TLSKeys are the query keys TLS reads.
var TLSKeys = []string{"tls_ca", "tls_insecure", "tls_server_name"}

// TLS reads tls_ca, tls_insecure and tls_server_name. secure says the
// scheme is a TLS one (its name is scheme); without it, any TLS key, or
// any of extra (a backend's own TLS keys), is refused, since a plain
// connection would silently ignore it.
func (q *URLQuery) TLS(secure bool, scheme string, extra ...string) TLSOptions {
	var o TLSOptions
	o.CA, o.ServerName = q.Get("tls_ca"), q.Get("tls_server_name")
	q.Bool("tls_insecure", &o.Insecure)
	if !secure {
		for _, k := range append(slices.Clone(TLSKeys), extra...) {
			if q.Has(k) {
				q.Failf("%s needs %s:// (TLS)", k, scheme)
				break
			}
		}
	}
	return o
}
