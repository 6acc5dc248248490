// Package redisstream is the Redis Streams backend (redis://…?stream=KEY):
// the DLQ is one stream, each entry's fields an envelope (the canonical envelope form, docs/json.md field
// names). It reads with XRANGE in pages and never holds the whole stream,
// and reports the consumer groups of the origin streams for `stats` and
// `pending`.
package redisstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/dlqctl/dlqctl/backend"
	"github.com/dlqctl/dlqctl/envelope"
)

var (
	_ backend.Source      = (*Stream)(nil)
	_ backend.LeanScanner = (*Stream)(nil)
	_ backend.Importer    = (*Stream)(nil)
	_ backend.Extras      = (*Stream)(nil)
)

// DefaultPageSize is the XRANGE COUNT of a scan.
const DefaultPageSize = 1000

// Options are what Open takes besides the URL.
type Options struct {
	// Fields are the envelope's field names and aliases; nil means
	// envelope.DefaultFieldNames. A field missing from the map keeps its
	// default names.
	Fields envelope.FieldNames
	// Password is used when the URL carries none (DLQCTL_REDIS_PASSWORD,
	// read by the caller).
	Password string
	// TLS, when set, replaces the TLS settings a rediss:// URL's query
	// would build. It has no effect on redis:// URLs.
	TLS *tls.Config
	// PageSize is the XRANGE COUNT of a scan (default 1000).
	PageSize int
	// LeaseTTL is how long the DLQ lease outlives its last renewal
	// (default DefaultLeaseTTL).
	LeaseTTL time.Duration
}

// Stream is a DLQ held in one Redis stream.
type Stream struct {
	// rdb is a *redis.Client, or a *redis.ClusterClient with ?cluster=true.
	rdb     redis.UniversalClient
	cluster bool
	src     sourceURL
	key     string
	group   string
	names   envelope.FieldNames
	// move and moveOne are the move scripts for this stream's group and
	// field names: many entries per call, and one.
	move     *redis.Script
	moveOne  *redis.Script
	pageSize int
	// plainPages reads every page through go-redis's own parser instead
	// of the fast one (xrange.go): tests and benchmarks compare the two.
	plainPages bool
	dec        *entryDecoder
	password   string // only to scrub error messages
	// missing: the stream did not exist when the Stream was opened.
	missing  bool
	leaseTTL time.Duration

	mu sync.Mutex
	// sourceIDs holds the dlqctl_source_id of every entry, built by one
	// scan on the first import of an envelope whose id is no stream id.
	sourceIDs map[string]bool
}

// Open parses rawURL, connects and checks with PING that the server
// answers and accepts the credentials. A stream that does not exist yet is
// an empty DLQ; a key of another type is an error.
//
// URL mistakes are *backend.ConfigError. No error carries the password.
func Open(ctx context.Context, rawURL string, opts Options) (*Stream, error) {
	src, err := parseURL(rawURL)
	if err != nil {
		return nil, scrub(err, src.password, opts.Password)
	}
	return openURL(ctx, src, opts)
}

// openURL is Open of a parsed URL.
func openURL(ctx context.Context, src sourceURL, opts Options) (*Stream, error) {
	s, err := open(ctx, src, opts)
	if err != nil {
		return nil, scrub(err, src.password, opts.Password)
	}
	return s, nil
}

func open(ctx context.Context, src sourceURL, opts Options) (*Stream, error) {
	names, err := opts.Fields.Complete()
	if err != nil {
		return nil, backend.Configf("redis source %s: %v", src.Display(), err)
	}
	pageSize := opts.PageSize
	switch {
	case pageSize == 0:
		pageSize = DefaultPageSize
	case pageSize < 0:
		return nil, backend.Configf("redis source %s: page size %d: want a positive number", src.Display(), pageSize)
	}
	ro := &redis.Options{
		Addr:     src.addr(),
		Username: src.user,
		Password: src.password,
		DB:       src.db,
		// The ctx of each call bounds it, so that Ctrl-C stops a scan.
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
		// One dial per attempt, not go-redis's 5 with 100ms pauses: with
		// its 3 command retries a refused connection took ~1.7s to fail.
		// Commands keep 2 retries; the move scripts are never retried
		// (see onceCmd).
		DialerRetries: 1,
		MaxRetries:    2,
		// Off: in its default "auto" mode the client would probe for a
		// Redis Cloud feature on every connection and log when it is absent.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	if !src.hasPassword {
		ro.Password = opts.Password
	}
	if src.scheme == "rediss" {
		if opts.TLS != nil {
			ro.TLSConfig = opts.TLS.Clone()
		} else if ro.TLSConfig, err = src.tlsConfig(); err != nil {
			return nil, err
		}
	}
	var rdb redis.UniversalClient
	if src.cluster {
		rdb = newClusterClient(ro)
	} else {
		rdb = redis.NewClient(ro)
	}
	s := &Stream{
		rdb:      rdb,
		cluster:  src.cluster,
		src:      src,
		key:      src.stream,
		group:    src.group,
		names:    names,
		move:     moveManyScriptFor(src.group, names[envelope.FieldFingerprint], names[envelope.FieldRedriveCount]),
		moveOne:  moveOneScriptFor(src.group, names[envelope.FieldFingerprint], names[envelope.FieldRedriveCount]),
		pageSize: pageSize,
		dec:      newEntryDecoder(names),
		password: ro.Password,
		leaseTTL: opts.LeaseTTL,
	}
	if err := s.check(ctx); err != nil {
		_ = s.rdb.Close()
		return nil, err
	}
	return s, nil
}

// check pings the server and the stream's key type.
func (s *Stream) check(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		msg := err.Error()
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("%s: connect: %w", s.src.typed, ctx.Err())
		case strings.HasPrefix(msg, "WRONGPASS"), strings.HasPrefix(msg, "NOAUTH"),
			strings.Contains(msg, "invalid password"), strings.Contains(msg, "invalid username-password"):
			return fmt.Errorf("%s: authentication failed: %w (check the user and password in the URL or DLQCTL_REDIS_PASSWORD)", s.src.typed, err)
		case strings.Contains(msg, "DB index is out of range"):
			return backend.Configf("%s: database %d does not exist on this server: %v", s, s.src.db, err)
		}
		return fmt.Errorf("%s: cannot reach Redis: %w", s.src.typed, err)
	}
	typ, err := s.rdb.Type(ctx, s.key).Result()
	if err != nil {
		return s.cmdErr(ctx, "type", err)
	}
	if typ != "none" && typ != "stream" {
		return backend.Configf("%s: key %q holds a %s, not a stream (WRONGTYPE): check ?stream=", s, s.key, typ)
	}
	s.missing = typ == "none"
	return nil
}

// Notice says what a person should know about the source before reading
// it: here, that the stream does not exist (often a typo in ?stream=).
func (s *Stream) Notice() string {
	if s.missing {
		return fmt.Sprintf("stream %q does not exist on %s: reading it as an empty DLQ (check ?stream=)", s.key, s)
	}
	return ""
}

// MissingDLQ names the stream when it did not exist when opened ("" when
// it did), after the redacted URL: "redis://h:6379/0?stream=dlq: stream
// "dlq" does not exist".
func (s *Stream) MissingDLQ() string {
	if !s.missing {
		return ""
	}
	return fmt.Sprintf("%s: stream %q does not exist", s, s.key)
}

// String is the source URL with any password replaced by xxxxx.
func (s *Stream) String() string { return s.src.Display() }

// Close closes the connection pool.
func (s *Stream) Close() error { return s.rdb.Close() }

// Client is the connection, for the moves that need Lua scripts (redrive,
// quarantine): a *redis.Client, or a *redis.ClusterClient when the URL
// says cluster=true. The caller must not close it.
func (s *Stream) Client() redis.UniversalClient { return s.rdb }

// Key is the DLQ stream's key.
func (s *Stream) Key() string { return s.key }

// Group is the consumer group the DLQ is read through ("" when none).
func (s *Stream) Group() string { return s.group }

// Fields are the field names entries are read and written with.
func (s *Stream) Fields() envelope.FieldNames { return s.names }

// Scan reads the stream oldest first with XRANGE, PageSize entries at a
// time, starting after the entry id `after`.
func (s *Stream) Scan(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	return s.scan(ctx, after, false, fn)
}

// ScanLean is Scan with lean envelopes (backend.LeanScanner): without
// properties, the payload's encoding or the raw form.
func (s *Stream) ScanLean(ctx context.Context, after string, fn func(envelope.Envelope) error) error {
	return s.scan(ctx, after, true, fn)
}

// scan is Scan, lean or not. Pages are read one ahead, on a goroutine of
// their own: the server's answer and its parsing overlap the decoding of
// the page before, which with two CPUs is most of a scan's time. fn is
// called in stream order, on the caller's goroutine.
func (s *Stream) scan(ctx context.Context, after string, lean bool, fn func(envelope.Envelope) error) error {
	start := "-"
	if after != "" {
		if !IsStreamID(after) {
			return backend.Configf("%s: cursor %q is not a Redis stream entry id (ms-seq)", s, after)
		}
		start = "(" + after
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan []streamEntry, 1)
	read := make(chan error, 1)
	go func() {
		defer close(pages)
		read <- s.readPages(rctx, start, pages)
	}()
	stop := func(err error) error {
		cancel()
		for range pages {
		}
		<-read
		return err
	}
	for page := range pages {
		for _, se := range page {
			if err := ctx.Err(); err != nil {
				return stop(err)
			}
			if err := fn(s.dec.decode(se, lean)); err != nil {
				if errors.Is(err, backend.ErrStop) {
					err = nil
				}
				return stop(err)
			}
		}
	}
	return <-read
}

// readPages sends the stream's pages from start on, each entry copied out
// of the reply, until the end of the stream or ctx.
func (s *Stream) readPages(ctx context.Context, start string, out chan<- []streamEntry) error {
	pg := &pager{s: s}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := pg.next(ctx, start, "+", int64(s.pageSize))
		if err != nil {
			return s.cmdErr(ctx, "xrange", err)
		}
		if n == 0 {
			return nil
		}
		page := make([]streamEntry, n)
		for i := range page {
			page[i] = pg.entry(i)
		}
		select {
		case out <- page:
		case <-ctx.Done():
			return ctx.Err()
		}
		if n < s.pageSize {
			return nil
		}
		start = "(" + page[n-1].ID
	}
}

// ScanFingerprints reads every entry's id and fingerprint: the carried
// fingerprint field when there is one, else the full decode's (computed)
// one. It pages like Scan and skips decoding what it does not need.
//
// With more than one CPU the stream is read in two halves at once, each on
// its own connection: parsing go-redis's reply (a map per entry) is most
// of the time of an apply's staleness read, which reads the whole DLQ
// before anything moves, and the server answers faster than one client
// goroutine parses. fn is still called by one goroutine at a time, but not
// in stream order.
func (s *Stream) ScanFingerprints(ctx context.Context, fn func(id, fingerprint string) error) error {
	ranges, err := s.halves(ctx)
	if err != nil {
		return err
	}
	if len(ranges) == 1 {
		return s.scanFingerprints(ctx, ranges[0], fn)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex // held while fn runs
		fnErr error      // what fn returned, once it failed: fn is not called again
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	for _, r := range ranges {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.scanFingerprints(ctx, r, func(id, fp string) error {
				mu.Lock()
				defer mu.Unlock()
				if fnErr != nil {
					return fnErr
				}
				fnErr = fn(id, fp)
				return fnErr
			})
			if err != nil {
				errMu.Lock()
				// The other half's cancellation is not the cause.
				if first == nil || (errors.Is(first, context.Canceled) && !errors.Is(err, context.Canceled)) {
					first = err
				}
				errMu.Unlock()
				cancel()
			}
		}()
	}
	wg.Wait()
	if fnErr != nil {
		return fnErr
	}
	return first
}

// idRange is an XRANGE's start and end.
type idRange struct{ start, end string }

// halves splits the stream in two ranges at the millisecond halfway
// between its first and last entries, or gives the whole stream as one
// range when there is one CPU or too little to split.
func (s *Stream) halves(ctx context.Context) ([]idRange, error) {
	whole := []idRange{{"-", "+"}}
	if runtime.GOMAXPROCS(0) < 2 {
		return whole, nil
	}
	first, err := s.rdb.XRangeN(ctx, s.key, "-", "+", 1).Result()
	if err != nil {
		return nil, s.cmdErr(ctx, "xrange", err)
	}
	last, err := s.rdb.XRevRangeN(ctx, s.key, "+", "-", 1).Result()
	if err != nil {
		return nil, s.cmdErr(ctx, "xrevrange", err)
	}
	if len(first) == 0 || len(last) == 0 {
		return whole, nil
	}
	lo, ok1 := idMillis(first[0].ID)
	hi, ok2 := idMillis(last[0].ID)
	if !ok1 || !ok2 || hi <= lo {
		return whole, nil
	}
	// Every id below mid-0 is in the first range, every other in the
	// second: "(" makes the first range's end exclusive.
	mid := strconv.FormatUint(lo+(hi-lo)/2+1, 10) + "-0"
	return []idRange{{"-", "(" + mid}, {mid, "+"}}, nil
}

// idMillis is the millisecond part of a stream id.
func idMillis(id string) (uint64, bool) {
	ms, _, ok := strings.Cut(id, "-")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(ms, 10, 64)
	return v, err == nil
}

// fingerprintPage bounds the XRANGE COUNT of ScanFingerprints, the
// staleness read, which waits on nothing but the replies. Measured on
// 100,000 entries of about 600 bytes on a loaded two-core host
// (BenchmarkScanFingerprints/procs2, six alternations): 1.0–1.5 s at 250
// against 0.8–2.4 s at 1,000, and less of the server's CPU (0.19–0.23 s
// against 0.20–0.28 s); larger pages were slower. Likely why: a reply of
// 250 such entries fits a loopback socket's buffer, where one of 1,000
// has the server and the reader take turns filling and draining it.
const fingerprintPage = 250

// scanFingerprints is ScanFingerprints over one range, in stream order.
func (s *Stream) scanFingerprints(ctx context.Context, r idRange, fn func(id, fingerprint string) error) error {
	names := s.names[envelope.FieldFingerprint]
	start := r.start
	pg := &pager{s: s}
	page := min(s.pageSize, fingerprintPage)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := pg.next(ctx, start, r.end, int64(page))
		if err != nil {
			return s.cmdErr(ctx, "xrange", err)
		}
		id := ""
		for i := range n {
			id = pg.id(i)
			fp := ""
			for _, n := range names {
				if v, ok := pg.lookup(i, n); ok && v != "" {
					fp = v
					break
				}
			}
			if fp == "" {
				fp = s.dec.decode(pg.entry(i), true).Fingerprint
			}
			if err := fn(id, fp); err != nil {
				return err
			}
		}
		if n < page {
			return nil
		}
		start = "(" + id
	}
}

// Get reads the entry with stream id id.
func (s *Stream) Get(ctx context.Context, id string) (envelope.Envelope, error) {
	if !IsStreamID(id) {
		return envelope.Envelope{}, fmt.Errorf("%q is not a stream entry id: %w in %s", id, backend.ErrNotFound, s)
	}
	msgs, err := s.rdb.XRange(ctx, s.key, id, id).Result()
	if err != nil {
		return envelope.Envelope{}, s.cmdErr(ctx, "xrange", err)
	}
	if len(msgs) == 0 {
		return envelope.Envelope{}, fmt.Errorf("entry %s: %w in %s", id, backend.ErrNotFound, s)
	}
	return s.decode(msgs[0]), nil
}

// Len is XLEN: 0 for a stream that does not exist.
func (s *Stream) Len(ctx context.Context) (int64, error) {
	n, err := s.rdb.XLen(ctx, s.key).Result()
	if err != nil {
		return 0, s.cmdErr(ctx, "xlen", err)
	}
	return n, nil
}

func (s *Stream) decode(m redis.XMessage) envelope.Envelope {
	return envelope.DecodeFields(m.ID, "redis", stringFields(m.Values), s.names)
}

func stringFields(values map[string]any) map[string]string {
	fields := make(map[string]string, len(values))
	for k, v := range values {
		switch v := v.(type) {
		case string:
			fields[k] = v
		case nil:
			fields[k] = ""
		default:
			fields[k] = fmt.Sprint(v)
		}
	}
	return fields
}

var streamIDPattern = regexp.MustCompile(`^[0-9]{1,20}-[0-9]{1,20}$`)

// IsStreamID reports whether id is a complete stream entry id, ms-seq.
func IsStreamID(id string) bool {
	if !streamIDPattern.MatchString(id) {
		return false
	}
	ms, seq, _ := strings.Cut(id, "-")
	_, err1 := strconv.ParseUint(ms, 10, 64)
	_, err2 := strconv.ParseUint(seq, 10, 64)
	return err1 == nil && err2 == nil
}

// cmdErr names the source and the command in a Redis error, and returns a
// cancelled or expired ctx as itself.
func (s *Stream) cmdErr(ctx context.Context, cmd string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if isWrongType(err) {
		return fmt.Errorf("%s: %s: key %q is not a stream: %w", s, cmd, s.key, err)
	}
	return scrub(fmt.Errorf("%s: %s: %w", s, cmd, err), s.password)
}

func isWrongType(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE")
}

// scrub hides secrets in an error's text (backend.Scrub).
func scrub(err error, secrets ...string) error { return backend.Scrub(err, secrets...) }
