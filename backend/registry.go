package backend

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/dlqctl/dlqctl/envelope"
)

// OpenOptions is what a backend may take from the invocation besides its
// URL. The command layer fills it; a backend reads only what it needs.
type OpenOptions struct {
	// Fields are the envelope field names and aliases in effect (Redis
	// fields, Pulsar properties, Kafka headers, SQS attributes).
	Fields envelope.FieldNames
	// EventIDFrom is --event-id-from as given ("" for the backend's default);
	// each backend parses the forms it supports.
	EventIDFrom string
	// KeyFrom is --key-from as given ("" for the backend's default order
	// key). Registry.Open refuses a non-empty one for a backend whose
	// Registration.KeyFrom is empty.
	KeyFrom string
	// Getenv reads the environment (DLQCTL_REDIS_PASSWORD and the like).
	// Never nil when the command layer calls Open.
	Getenv func(string) string
	// AllowMissing: a DLQ that does not exist (a queue folder, say) is to
	// be read as empty on purpose (check and stats --allow-missing), not
	// refused. Backends that read a missing DLQ as empty anyway report it
	// through MissingDLQ() instead.
	AllowMissing bool
	// Stderr receives what a backend waits for when a step takes long (a
	// broker recovering, a crashed run's transaction); nil discards it.
	Stderr io.Writer
	// Secret returns a secret from the selected config profile by its key
	// (e.g. "redis_password"), "" when unset. Never nil when the command
	// layer calls Open.
	Secret func(key string) string
}

func (o OpenOptions) env(name string) string {
	if o.Getenv == nil {
		return ""
	}
	return o.Getenv(name)
}

func (o OpenOptions) secret(key string) string {
	if o.Secret == nil {
		return ""
	}
	return o.Secret(key)
}

// Env returns the environment variable name, or "" (safe on a zero OpenOptions).
func (o OpenOptions) Env(name string) string { return o.env(name) }

// ProfileSecret returns the profile's secret key, or "" (safe on a zero OpenOptions).
func (o OpenOptions) ProfileSecret(key string) string { return o.secret(key) }

// EnvVar is an environment variable a backend reads, for help and docs.
type EnvVar struct {
	Name string
	Help string
	// Password: the variable gives the password of the URL's user when
	// the URL carries none. A command that dlqctl prints for someone to
	// run names it instead of a password it cannot show.
	Password bool
}

// Capabilities say what a backend can do; docs/backends.md and the
// conformance suite are built from them.
type Capabilities struct {
	Read   bool // list, show, stats, categorize, sample, check, export
	Import bool // import
	// Move is "atomic" (publish and remove in one conditional step),
	// "two-step" (publish, then remove; the journal covers the gap) or ""
	// (no redrive).
	Move    string
	Resolve bool // resolve (archive, then remove)
	Tail    bool // re-dead-letter detection from the newest entry on
	Extras  bool // a backend section in stats
	Lease   bool // a DLQ-level lease: one run at a time holds the DLQ
	Pending bool // pending and quarantine of consumer-group entries
}

// Parsed is what a backend's URL parser found, without connecting.
type Parsed struct {
	// Display is the URL with every secret replaced by Redacted.
	Display string
	// Secrets are the secret strings found in the URL (passwords, tokens),
	// so that every echo and error can be scrubbed of them.
	Secrets []string
	// Config is the backend's typed form of the URL (URLConfig), which
	// its Open receives: a URL is parsed once.
	Config any
}

// Registration describes one backend to the command layer.
type Registration struct {
	// Name is the backend's name in docs and in envelopes' origin.backend.
	Name string
	// Schemes are the URL schemes it serves ("redis", "rediss"). A scheme
	// followed by ":" alone (dir:PATH) is as valid as "://".
	Schemes []string
	// Claims, when set, says whether this backend serves raw, a URL of one
	// of its Schemes, so that two backends can share a scheme (SQS claims
	// an https URL whose host is an SQS endpoint). nil claims every URL of
	// its schemes; of the backends sharing a scheme at most one may leave
	// it nil, and it takes what the others do not claim.
	Claims func(raw string) bool
	// Title is the broker's name as help and the README write it
	// ("Redis Streams", "Apache Kafka").
	Title string
	// Usage is the URL form for help ("redis://[user:pass@]host:port/db?stream=KEY").
	Usage string
	// EventIDFrom lists the --event-id-from forms the backend reads
	// ("header:NAME, json:PATH or key"); "" when it takes none.
	EventIDFrom string
	// KeyFrom lists the --key-from forms the backend reads ("header:NAME");
	// "" when its order key is fixed (Kafka's record key, SQS's group).
	KeyFrom string
	// Summary says in a few words what the DLQ is ("a Redis stream").
	Summary string
	// Env lists the environment variables it reads.
	Env          []EnvVar
	Capabilities Capabilities
	// ScanGC, when not 0, is the collector's GOGC for a command that reads
	// this backend. At Go's default of 100 the collector runs each time
	// the heap doubles what is live; a client that decodes every fetch
	// into new memory (Kafka's: about 1.7 KB per record, of which a scan
	// keeps a few bytes) makes it run so often that it costs a quarter of
	// a scan's CPU. The operator's GOGC, when set, wins.
	ScanGC int
	// ScanHeapLimit, when not 0, is the soft memory limit (bytes) of a
	// command that reads this backend: with ScanGC's pace, a client's
	// fetch buffers and a long state grow the heap to several times what
	// is live. The operator's GOMEMLIMIT, when set, wins, and a plan
	// command's higher limit replaces it.
	ScanHeapLimit int64
	// Factory parses a source URL (Parse, without connecting) and opens
	// what it parsed (Open); NewFactory makes it from the backend's typed
	// URL parser and opener.
	Factory
	// Init creates an empty DLQ at raw (import --init); nil when the
	// backend creates its DLQ on first write or cannot create one.
	Init func(raw string) error
	// InitDLQ creates a DLQ where the broker keeps none (dlq init); nil
	// when the backend has nothing to create.
	InitDLQ DLQInitFunc
	// Secrets returns the secrets Open would read from opts besides the
	// URL (env, profile), so that they are scrubbed too. May be nil.
	Secrets func(opts OpenOptions) []string
	// Setup, when set, prepares the process for the backend, once, before
	// a command runs (Registry.Setup): Redis silences go-redis's global
	// logger, whose dial retries reach the user as returned errors anyway.
	Setup func()
	// GroupsSource, when set, is the source URL that pending opens to
	// inspect a stream's consumer groups, made from the source in effect
	// (Redis: stream=STREAM added to a URL that names no stream, since a
	// Redis source must name one). nil: the source in effect as it is.
	GroupsSource func(raw, stream string) string
	// ProfileKeys are keys of a config profile, besides those every
	// profile has, that hold this backend's secrets ("redis_password"):
	// the first backends read theirs there, later ones from the profile's
	// secrets map ("kafka_password"), which takes any key. Both reach
	// Open through OpenOptions.ProfileSecret.
	ProfileKeys []string
}

// Registry maps URL schemes to backends. Commands get one from the
// backends list (backends/all); tests can build their own.
type Registry struct {
	mu sync.RWMutex
	// byScheme lists, per scheme, the backends serving it: those with a
	// Claims predicate first, in registration order, then the one without.
	byScheme map[string][]*Registration
	order    []*Registration
}

// NewRegistry returns a registry holding regs, in their order (a test's
// one backend, say); none gives an empty one.
func NewRegistry(regs ...Registration) *Registry {
	r := &Registry{byScheme: map[string][]*Registration{}}
	for _, reg := range regs {
		r.Register(reg)
	}
	return r
}

// Register adds a backend. A scheme that two backends serve without a
// Claims predicate is a programming error and panics, as database/sql does.
func (r *Registry) Register(reg Registration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if reg.Name == "" || len(reg.Schemes) == 0 || reg.Parse == nil || reg.Open == nil {
		panic("backend: Register needs a name, schemes, Parse and Open")
	}
	rp := &reg
	for _, s := range reg.Schemes {
		regs := r.byScheme[s]
		if reg.Claims == nil {
			for _, other := range regs {
				if other.Claims == nil {
					panic("backend: scheme " + s + " registered twice without a Claims predicate")
				}
			}
			r.byScheme[s] = append(regs, rp)
			continue
		}
		i := 0
		for i < len(regs) && regs[i].Claims != nil {
			i++
		}
		r.byScheme[s] = append(regs[:i:i], append([]*Registration{rp}, regs[i:]...)...)
	}
	r.order = append(r.order, rp)
}

// All returns the registered backends in registration order.
func (r *Registry) All() []Registration {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Registration, len(r.order))
	for i, rp := range r.order {
		out[i] = *rp
	}
	return out
}

// Titles lists the backends' titles as prose: "A, B or C".
func (r *Registry) Titles() string {
	var t []string
	for _, reg := range r.All() {
		t = append(t, reg.Title)
	}
	return proseList(t, " or ")
}

// EventIDFromHelp says, for each backend that takes --event-id-from,
// which forms it reads: "for Apache Kafka (header:NAME, …) and …".
func (r *Registry) EventIDFromHelp() string {
	return r.formsHelp(func(reg Registration) string { return reg.EventIDFrom })
}

// KeyFromHelp says, for each backend that takes --key-from, which forms
// it reads: "for RabbitMQ (header:NAME)".
func (r *Registry) KeyFromHelp() string {
	return r.formsHelp(func(reg Registration) string { return reg.KeyFrom })
}

// formsHelp lists, as "for TITLE (FORMS) and …", the backends for which
// forms is not empty; "" when there are none.
func (r *Registry) formsHelp(forms func(Registration) string) string {
	var parts []string
	for _, reg := range r.All() {
		if f := forms(reg); f != "" {
			parts = append(parts, reg.Title+" ("+f+")")
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "for " + proseList(parts, " and ")
}

// keyFromTakers names the backends that take --key-from, as prose.
func (r *Registry) keyFromTakers() string {
	var t []string
	for _, reg := range r.All() {
		if reg.KeyFrom != "" {
			t = append(t, reg.Title)
		}
	}
	if len(t) == 0 {
		return "none of this build's backends"
	}
	return proseList(t, " and ")
}

// proseList joins items as a sentence does: "a, b" + last + "c".
func proseList(items []string, last string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + last + items[len(items)-1]
}

// Schemes lists every registered scheme, sorted.
func (r *Registry) Schemes() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.byScheme))
	for s := range r.byScheme {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Setup runs every backend's Setup (Registration.Setup). The process
// calls it once, before a command runs.
func (r *Registry) Setup() {
	for _, reg := range r.All() {
		if reg.Setup != nil {
			reg.Setup()
		}
	}
}

// ProfileKeys lists the profile keys the backends declare
// (Registration.ProfileKeys), sorted.
func (r *Registry) ProfileKeys() []string {
	var keys []string
	for _, reg := range r.All() {
		keys = append(keys, reg.ProfileKeys...)
	}
	sort.Strings(keys)
	return slices.Compact(keys)
}

// SchemeOf returns the scheme of a source URL: the text before "://" or,
// failing that, before the first ":".
func SchemeOf(raw string) string {
	if i := strings.Index(raw, "://"); i >= 0 {
		return raw[:i]
	}
	s, _, _ := strings.Cut(raw, ":")
	return s
}

// Lookup returns the backend serving raw: the first of its scheme's
// backends that claims it, else the one that claims every URL of the
// scheme. When the scheme has one backend only, it gets raw even if its
// predicate says no, so that its Parse explains what is wrong.
func (r *Registry) Lookup(raw string) (Registration, error) {
	if fixed := r.missingSlashes(raw); fixed != "" {
		// raw itself is not echoed: without its "//" it does not parse as
		// a URL, so its password could not be hidden.
		return Registration{}, Configf("source: want %s://…; did you mean %q?", SchemeOf(fixed), RedactURL(fixed))
	}
	scheme := SchemeOf(raw)
	r.mu.RLock()
	regs := r.byScheme[scheme]
	_, dir := r.byScheme["dir"]
	r.mu.RUnlock()
	for _, reg := range regs {
		if reg.Claims == nil || reg.Claims(raw) {
			return *reg, nil
		}
	}
	if len(regs) == 1 {
		return *regs[0], nil
	}
	if len(regs) > 1 {
		names := make([]string, len(regs))
		for i, reg := range regs {
			names[i] = reg.Name
		}
		return Registration{}, Configf("source %q: no backend serving %s:// takes this URL (%s)", RedactURL(raw), scheme, strings.Join(names, ", "))
	}
	if dir && !strings.Contains(raw, ":") {
		// A bare path is almost always a queue folder typed without
		// its scheme.
		return Registration{}, Configf("source %q has no scheme: for a queue folder write dir:%s (other schemes: %s)", raw, raw, r.schemeList())
	}
	return Registration{}, Configf("source %q: unknown scheme %q (want one of %s)", RedactURL(raw), scheme, r.schemeList())
}

// missingSlashes is raw with the "://" its scheme lacks ("redis:/host",
// "redis//host", "redis:host" for a URL scheme other than dir:), or ""
// when it lacks nothing. (A bare "redis/x" is a folder's path.)
func (r *Registry) missingSlashes(raw string) string {
	if strings.Contains(raw, "://") {
		return ""
	}
	for _, s := range r.Schemes() {
		if s == "dir" {
			continue
		}
		for _, typo := range []string{s + ":", s + "//"} {
			if rest, ok := strings.CutPrefix(raw, typo); ok && rest != "" {
				return s + "://" + strings.TrimLeft(rest, ":/")
			}
		}
	}
	return ""
}

func (r *Registry) schemeList() string {
	var parts []string
	for _, s := range r.Schemes() {
		if s == "dir" {
			parts = append(parts, "dir:")
			continue
		}
		parts = append(parts, s+"://")
	}
	return strings.Join(parts, ", ")
}

// Open parses raw with its backend and connects. Every error it returns is
// scrubbed of the secrets in the URL and those the backend reads from opts.
func (r *Registry) Open(ctx context.Context, raw string, opts OpenOptions) (Source, error) {
	reg, err := r.Lookup(raw)
	if err != nil {
		return nil, err
	}
	secrets := URLSecrets(raw)
	if reg.Secrets != nil {
		secrets = append(secrets, reg.Secrets(opts)...)
	}
	p, err := reg.Parse(raw)
	if err != nil {
		return nil, Scrub(err, secrets...)
	}
	secrets = append(secrets, p.Secrets...)
	if opts.KeyFrom != "" && reg.KeyFrom == "" {
		// Read with another order key than asked, a redrive would hold
		// back or release entries by the wrong key: refused, not ignored.
		return nil, Configf("--key-from %q: %s takes no --key-from (only %s): its order key is fixed", opts.KeyFrom, reg.Title, r.keyFromTakers())
	}
	src, err := reg.Open(ctx, p, opts)
	if err != nil {
		// The URL's display forms stay whole: with a password that equals
		// the user name, scrubbing them would hide the user name too.
		return nil, ScrubAround(err, []string{p.Display, WithHiddenPassword(p.Display)}, secrets...)
	}
	return src, nil
}

// PasswordEnv is the variable that gives raw's backend the password its
// URL leaves out ("" when it has none, or raw names no backend).
func (r *Registry) PasswordEnv(raw string) string {
	reg, err := r.Lookup(raw)
	if err != nil {
		return ""
	}
	for _, e := range reg.Env {
		if e.Password {
			return e.Name
		}
	}
	return ""
}

// Display returns raw as it may be printed: through its backend's parser
// when it parses, else with any user info replaced.
func (r *Registry) Display(raw string) string {
	reg, err := r.Lookup(raw)
	if err == nil {
		if p, err := reg.Parse(raw); err == nil && p.Display != "" {
			return p.Display
		}
	}
	return RedactURL(raw)
}

// secretParams are query parameter names whose values are secrets.
func secretParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"password", "passwd", "token", "secret", "key", "credential", "signature"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// RedactURL is the one redactor for URLs that dlqctl echoes: the password
// of the user info and every query value whose name says it is a secret
// (password, token, secret, key, credential, signature) become Redacted.
// A URL that does not parse has everything between "://" and its last "@"
// replaced, which is where a password with unescaped characters ends; so
// has one with an "@" outside its user info (in a fragment after a stray
// "#", or in a query value such as admin=http://user:pass@host), where no
// field of the parsed URL says what is secret.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || (u.User == nil && strings.Contains(raw, "@")) {
		return RedactUserinfo(raw)
	}
	c := *u
	if c.User != nil {
		if _, ok := c.User.Password(); ok {
			c.User = url.UserPassword(c.User.Username(), Redacted)
		}
	}
	if c.RawQuery != "" {
		q, err := url.ParseQuery(c.RawQuery)
		if err != nil {
			c.RawQuery = Redacted
		} else {
			changed := false
			for k, vs := range q {
				if secretParam(k) {
					for i := range vs {
						vs[i] = Redacted
					}
					changed = true
				}
			}
			if changed {
				c.RawQuery = q.Encode()
			}
		}
	}
	return c.String()
}

// RedactUserinfo hides the user info of a URL that may not parse:
// everything between "://" and the last "@" (or, without "://", before
// the last "@"), which is where a password with unescaped special
// characters ends.
func RedactUserinfo(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		if at := strings.LastIndex(raw, "@"); at >= 0 {
			return Redacted + raw[at:]
		}
		return raw
	}
	rest := raw[i+3:]
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return raw
	}
	return raw[:i+3] + Redacted + rest[at:]
}

// URLSecrets returns the secrets written in a URL: the user info's
// password (raw and unescaped) and the values of secret-named query
// parameters. It never fails; what does not parse yields the raw user info.
func URLSecrets(raw string) []string {
	var out []string
	if i := strings.Index(raw, "://"); i >= 0 {
		rest := raw[i+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			userinfo := rest[:at]
			if _, pass, ok := strings.Cut(userinfo, ":"); ok && pass != "" {
				out = append(out, pass)
				if un, err := url.PathUnescape(pass); err == nil && un != pass {
					out = append(out, un)
				}
			}
		}
	}
	if u, err := url.Parse(raw); err == nil {
		for k, vs := range u.Query() {
			if secretParam(k) {
				out = append(out, vs...)
			}
		}
	}
	return out
}

// Noticer is implemented by sources with something a person should know
// before reading them (a stream that does not exist, say).
type Noticer interface {
	Notice() string
}

// ErrUnsupported: the backend does not support this operation; the
// command says so (exit 2).
var ErrUnsupported = fmt.Errorf("not supported by this backend")
