// Command incidentgen writes the sample incident that dlqctl's tests and docs
// use: a directory queue (the "dir:" backend) whose error/ holds about 300
// canonical envelopes (the canonical envelope form, docs/json.md) dead-lettered on 2026-11-29 between 08:00 and
// 10:00 UTC, and an empty inbox/.
//
//	go run ./internal/incidentgen -out testdata/incident
//
// The output depends on nothing but this code (a fixed seed, a fixed base
// time), so a rerun is byte-identical. After writing, it reads the files back,
// decides every entry's category with the built-in category rules, checks that each one
// landed where it was meant to, and writes README.md with the counts it found.
package main

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

const (
	seed           = 20261129
	envelopeSchema = "dlqctl.envelope/v1"
	largeMinBytes  = 256 << 10
)

var (
	// baseTime is "now" for the incident: every entry is dead-lettered
	// before it, and recover_by is either before it (overdue) or a day later.
	baseTime      = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	incidentStart = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
)

func main() {
	out := flag.String("out", "testdata/incident", "directory to (re)create the incident in")
	flag.Parse()
	if err := run(*out, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "incidentgen:", err)
		os.Exit(1)
	}
}

func run(out string, log io.Writer) error {
	if out == "" {
		return errors.New("-out is empty")
	}
	g := &gen{rng: rand.New(rand.NewSource(seed)), eventIDs: map[string]bool{}}
	g.world()
	specs := g.plan()
	entries, err := g.materialize(specs)
	if err != nil {
		return err
	}
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].dead.Before(entries[j].dead) })
	for i, e := range entries {
		e.env.ID = fmt.Sprintf("%s-%04d", e.dead.Format("20060102T150405Z"), i+1)
	}
	if err := write(out, entries); err != nil {
		return err
	}
	sum, err := verify(out, entries)
	if err != nil {
		return err
	}
	sum.print(log)
	return os.WriteFile(filepath.Join(out, "README.md"), []byte(sum.readme()), 0o644)
}

// ---------------------------------------------------------------- the world

type address struct {
	Line1    string `json:"line1"`
	City     string `json:"city"`
	Postcode string `json:"postcode"`
	Country  string `json:"country"`
}

type customer struct {
	ID      string
	Name    string
	Company string
	Email   string
	Phone   string
	Address address
}

type card struct {
	Brand    string `json:"brand"`
	Last4    string `json:"last4"`
	ExpMonth int    `json:"expMonth"`
	ExpYear  int    `json:"expYear"`
}

type item struct {
	SKU       string `json:"sku"`
	Name      string `json:"name,omitempty"`
	Qty       int    `json:"qty"`
	UnitPrice int    `json:"unitPrice"`
	Warehouse string `json:"warehouse,omitempty"`
	Lot       string `json:"lot,omitempty"`
}

type order struct {
	ID        string
	Tenant    string
	Region    string
	Currency  string
	Customer  customer
	Card      card
	Items     []item
	Amount    int // minor units
	CreatedAt time.Time
}

type gen struct {
	rng      *rand.Rand
	live     []*order // orders that still exist
	deleted  []*order // orders purged before their events were consumed
	eventIDs map[string]bool
}

type place struct {
	city, postcode, country, currency, tenant string
}

var places = []place{
	{"Berlin", "10115", "DE", "EUR", "acme"},
	{"München", "80331", "DE", "EUR", "acme"},
	{"Paris", "75001", "FR", "EUR", "acme"},
	{"Madrid", "28013", "ES", "EUR", "acme"},
	{"Milano", "20121", "IT", "EUR", "acme"},
	{"London", "NW1 6XE", "GB", "GBP", "acme"},
	{"Stockholm", "111 57", "SE", "SEK", "acme"},
	{"Springfield", "62701", "US", "USD", "globex"},
	{"Austin", "73301", "US", "USD", "globex"},
	{"Portland", "97201", "US", "USD", "globex"},
}

var (
	firstNames = []string{"Jane", "John", "Amara", "Lukas", "Sofia", "Mateo", "Yuki", "Priya", "Noah", "Elif",
		"Jürgen", "Chloé", "Oskar", "Fatima", "Liam", "Ingrid", "Diego", "Hana", "Tomasz", "Zoë"}
	lastNames = []string{"Doe", "Okafor", "Müller", "Rossi", "García", "Tanaka", "Sharma", "Smith", "Yılmaz",
		"Dubois", "Nowak", "Johansson", "Silva", "Kim", "O'Brien", "Novak", "Fischer", "Haddad"}
	companies = []string{"Müller & Söhne GmbH", "Okafor & Partners Ltd", "Rossi & Figli S.r.l.", "Nowak & Co.",
		"Silva & Irmãos Lda"}
	streets = []string{"Hauptstraße", "Rue de Rivoli", "Baker Street", "Calle Mayor", "Karl-Marx-Allee",
		"Elm Street", "Via Roma", "Kungsgatan", "Oak Avenue", "Maple Drive"}
	products = []string{"Espresso beans 1kg", "Ceramic mug", "Running shoes", "USB-C cable 2m", "Desk lamp",
		"Wool socks (3 pairs)", "Notebook A5", "Water bottle 750ml", "Headphones", "Yoga mat"}
	last4s = []string{"4242", "0005", "4444", "1117", "0004", "8210", "5100", "9424", "3220", "0019"}
	brands = []string{"visa", "mastercard", "amex"}
	asciiy = strings.NewReplacer("ü", "ue", "é", "e", "ë", "e", "ı", "i", "ã", "a", "'", "", "í", "i")
)

func (g *gen) pick(xs []string) string { return xs[g.rng.Intn(len(xs))] }

func (g *gen) hex(n int) string {
	b := make([]byte, (n+1)/2)
	g.rng.Read(b)
	return hex.EncodeToString(b)[:n]
}

func (g *gen) eventID() string {
	for {
		id := "evt-" + g.hex(12)
		if !g.eventIDs[id] {
			g.eventIDs[id] = true
			return id
		}
	}
}

// derivedID gives an entity ID that follows from the event, so that a
// changed re-publication of one event keeps its payment/shipment IDs.
func derivedID(prefix, eventID string) string {
	sum := sha256.Sum256([]byte(prefix + eventID))
	return prefix + hex.EncodeToString(sum[:])[:12]
}

func (g *gen) world() {
	seen := map[string]bool{}
	for i := 0; i < 150; i++ {
		var id string
		for id == "" || seen[id] {
			id = fmt.Sprintf("order-%05d", 10000+g.rng.Intn(90000))
		}
		seen[id] = true
		p := places[g.rng.Intn(len(places))]
		first, last := g.pick(firstNames), g.pick(lastNames)
		c := customer{
			ID:    "cus_" + g.hex(10),
			Name:  first + " " + last,
			Email: strings.ToLower(asciiy.Replace(first+"."+last)) + "@example.com",
			Address: address{
				Line1:    fmt.Sprintf("%s %d", g.pick(streets), 1+g.rng.Intn(180)),
				City:     p.city,
				Postcode: p.postcode,
				Country:  p.country,
			},
		}
		switch p.country {
		case "US":
			c.Phone = fmt.Sprintf("+1 202-555-01%02d", g.rng.Intn(100))
		case "GB":
			c.Phone = fmt.Sprintf("+44 20 7946 0%03d", g.rng.Intn(1000))
		default:
			c.Phone = fmt.Sprintf("+49 30 5550%04d", g.rng.Intn(10000))
		}
		if g.rng.Intn(6) == 0 {
			c.Company = g.pick(companies)
		}
		o := &order{
			ID:        id,
			Tenant:    p.tenant,
			Region:    map[string]string{"acme": "eu-central-1", "globex": "us-east-1"}[p.tenant],
			Currency:  p.currency,
			Customer:  c,
			Card:      card{Brand: g.pick(brands), Last4: g.pick(last4s), ExpMonth: 1 + g.rng.Intn(12), ExpYear: 2027 + g.rng.Intn(5)},
			CreatedAt: incidentStart.Add(-time.Duration(g.rng.Intn(240*60)) * time.Second),
		}
		for n := 1 + g.rng.Intn(4); n > 0; n-- {
			it := item{SKU: fmt.Sprintf("SKU-%04d", 1000+g.rng.Intn(9000)), Name: g.pick(products), Qty: 1 + g.rng.Intn(4), UnitPrice: 499 + g.rng.Intn(19500)}
			o.Items = append(o.Items, it)
			o.Amount += it.Qty * it.UnitPrice
		}
		if i < 24 {
			g.deleted = append(g.deleted, o)
		} else {
			g.live = append(g.live, o)
		}
	}
}

// ---------------------------------------------------------------- the plan

var origins = map[string]struct{ group, owner string }{
	"orders":   {"order-workers", "team-orders"},
	"payments": {"payment-workers", "team-payments"},
	"shipping": {"shipping-workers", "team-shipping"},
	"ledger":   {"ledger-writers", "team-ledger"},
}

// tmpl is one kind of failure: where it happens, what the consumer wrote
// into last_error, and how the payload looks (variant) when it happens.
type tmpl struct {
	topic   string
	variant string
	weight  int
	text    func(g *gen, o *order) string
}

func fixed(s string) func(*gen, *order) string { return func(*gen, *order) string { return s } }

var templates = map[string][]tmpl{
	"transient": {
		{"orders", "", 6, func(_ *gen, o *order) string {
			return "authorize payment for " + o.ID + ": timeout calling payments: context deadline exceeded"
		}},
		{"orders", "", 3, fixed("POST http://payments.internal:8080/v2/authorizations: context deadline exceeded (Client.Timeout exceeded while awaiting headers)")},
		{"orders", "", 2, fixed("authorize payment: payments-api: 503 Service Unavailable")},
		{"orders", "", 2, fixed("authorize payment: payments-api: 429 Too Many Requests (retry-after: 5s)")},
		{"payments", "", 5, func(_ *gen, o *order) string {
			return "capture " + o.ID + ": POST https://api.psp.example/v1/captures: 504 Gateway Timeout"
		}},
		{"payments", "", 4, func(g *gen, _ *order) string {
			return fmt.Sprintf("read tcp 10.20.3.%d:%d->10.20.7.31:443: read: connection reset by peer", 10+g.rng.Intn(50), 32768+g.rng.Intn(28000))
		}},
		{"payments", "", 4, fixed("dial tcp 10.20.7.31:443: i/o timeout")},
		{"payments", "", 3, fixed("psp: 429 Too Many Requests")},
		{"payments", "", 3, fixed("psp: 503 Service Unavailable: upstream connect error or disconnect/reset before headers")},
		{"payments", "", 4, fixed("capture payment: context deadline exceeded")},
		{"shipping", "", 2, fixed("create label: carrier API request timed out after 10s")},
		{"shipping", "", 1, fixed("POST https://api.carrier.example/v2/labels: 502 Bad Gateway")},
		{"shipping", "", 1, fixed("carrier API: 503 Service Unavailable")},
		{"ledger", "", 2, fixed("ledger-db: dial tcp 10.20.9.5:5432: connect: connection refused")},
		{"ledger", "", 2, fixed("pq: canceling statement due to statement timeout")},
		{"ledger", "", 1, fixed("post entry: ledger-api: 503 Service Unavailable")},
	},
	"schema": {
		{"orders", "amount-string", 5, fixed("json: cannot unmarshal string into Go struct field Order.amount of type int")},
		{"orders", "missing-currency", 5, fixed(`missing field "currency"`)},
		{"orders", "missing-currency", 3, fixed(`decode OrderPlaced (orders.v3): missing field "currency"`)},
		{"orders", "missing-currency", 2, fixed(`validate order: required field "currency" is missing`)},
		{"shipping", "missing-weight", 3, fixed(`deserialize ShipmentRequested: missing field "weightGrams"`)},
		{"shipping", "missing-weight", 2, fixed(`schema check shipping.v3: required field "weightGrams" is missing`)},
	},
	"code-defect": {
		{"shipping", "nil-address", 6, fixed("panic: runtime error: invalid memory address or nil pointer dereference [signal SIGSEGV: segmentation violation code=0x1 addr=0x38 pc=0x9d42c1]")},
		{"shipping", "nil-address", 4, fixed("recovered panic in ShipmentRequested handler: runtime error: invalid memory address or nil pointer dereference")},
		{"shipping", "three-parcels", 3, fixed("panic: runtime error: index out of range [3] with length 3")},
		{"orders", "three-items", 2, fixed("panic: runtime error: index out of range [3] with length 3")},
	},
	"permission": {
		{"ledger", "", 5, fixed("403 Forbidden: token revoked")},
		{"ledger", "", 4, fixed("pq: permission denied for table ledger_entries")},
		{"ledger", "", 3, fixed("post entry: ledger-api: 401 Unauthorized: credential svc-ledger-writer revoked")},
		{"ledger", "", 2, fixed("ERROR: permission denied for table ledger_entries (SQLSTATE 42501)")},
		{"payments", "", 2, fixed("psp: 403 Forbidden: API key revoked")},
	},
	"missing-reference": {
		{"orders", "", 4, func(_ *gen, o *order) string { return "order " + o.ID + " not found" }},
		{"orders", "", 2, func(_ *gen, o *order) string { return "load customer " + o.Customer.ID + ": customer was deleted" }},
		{"payments", "", 3, func(_ *gen, o *order) string { return "capture payment: order " + o.ID + " not found" }},
		{"payments", "", 2, func(_ *gen, o *order) string { return "payment intent for " + o.ID + " does not exist" }},
		{"shipping", "", 3, func(_ *gen, o *order) string { return "no such order: " + o.ID }},
		{"shipping", "", 2, fixed("customer was deleted")},
		{"ledger", "", 2, func(_ *gen, o *order) string { return "unknown order " + o.ID }},
		{"ledger", "", 1, func(_ *gen, o *order) string { return "account for customer " + o.Customer.ID + " does not exist" }},
	},
	"unknown": {
		{"orders", "", 3, func(_ *gen, o *order) string { return "insufficient inventory for sku " + o.Items[0].SKU }},
		{"orders", "", 2, func(_ *gen, o *order) string { return "fraud check rejected order " + o.ID + " (score 0.97)" }},
		{"orders", "", 1, fixed("coupon BLACKFRIDAY26 expired before checkout completed")},
		{"shipping", "", 2, func(_ *gen, o *order) string {
			return "state machine: cannot transition order " + o.ID + " from CANCELLED to SHIPPED"
		}},
		{"shipping", "", 1, fixed("address rejected by carrier: PO boxes are not supported")},
		{"payments", "", 2, fixed("refund amount exceeds captured amount")},
		{"payments", "", 2, fixed("payment declined by issuer: do_not_honor")},
		{"ledger", "", 1, func(_ *gen, o *order) string { return "credit limit exceeded for customer " + o.Customer.ID }},
	},
}

// windows says, per category, when its failures happened (minutes after 08:00).
var windows = map[string][2]int{
	"transient":         {12, 118}, // payments dependency timing out
	"schema":            {47, 119}, // orders-api deploy with v3 payloads at 08:45
	"code-defect":       {27, 119}, // shipping consumer deploy at 08:25
	"permission":        {63, 119}, // ledger credential revoked at 09:02
	"missing-reference": {6, 119},  // purge job deleted orders at 08:05
	"unknown":           {0, 119},
}

var attemptRange = map[string][2]int{
	"transient":         {3, 12},
	"schema":            {1, 3},
	"code-defect":       {3, 8},
	"permission":        {4, 10},
	"missing-reference": {1, 3},
	"unknown":           {1, 5},
}

type spec struct {
	category   string // what the built-in category rules should decide for the file
	topic      string
	variant    string
	lastError  string
	errorClass string
	order      *order
	eventID    string
	dead       time.Time
	attempts   int
	redrives   int
	encoding   string
	version    string
	amountCut  int    // subtracted from the amount: a corrected re-publication
	role       string // "", conflict, duplicate, large, hint, malformed
	malformed  string // which defect, when role is malformed
	dupOf      *spec  // the first copy, for the second copy of a duplicate
	fpMode     string // match, none, mismatch, md5
	entry      *entry
}

func (g *gen) timeIn(minutes [2]int) time.Time {
	lo, hi := minutes[0]*60, minutes[1]*60+59
	// The sum of two uniforms peaks in the middle of the window, like an incident.
	s := lo + (g.rng.Intn(hi-lo+1)+g.rng.Intn(hi-lo+1))/2
	if s >= 7200 {
		s = 7199
	}
	return incidentStart.Add(time.Duration(s) * time.Second)
}

func at(hhmmss string) time.Time {
	t, err := time.Parse("2006-01-02T15:04:05Z", "2026-11-29T"+hhmmss+"Z")
	if err != nil {
		panic(err)
	}
	return t
}

func (g *gen) attemptsFor(category string) int {
	r := attemptRange[category]
	return r[0] + g.rng.Intn(r[1]-r[0]+1)
}

func (g *gen) choose(ts []tmpl) tmpl {
	total := 0
	for _, t := range ts {
		total += t.weight
	}
	n := g.rng.Intn(total)
	for _, t := range ts {
		if n < t.weight {
			return t
		}
		n -= t.weight
	}
	panic("unreachable")
}

func (g *gen) regular(category string, n int) []*spec {
	var out []*spec
	for i := 0; i < n; i++ {
		t := g.choose(templates[category])
		pool := g.live
		if category == "missing-reference" {
			pool = g.deleted
		}
		o := pool[g.rng.Intn(len(pool))]
		s := &spec{
			category: category, topic: t.topic, variant: t.variant, lastError: t.text(g, o),
			order: o, eventID: g.eventID(), dead: g.timeIn(windows[category]),
			attempts: g.attemptsFor(category), encoding: "json", version: "2",
		}
		switch {
		case category == "schema":
			s.version = "3"
		case t.topic == "orders" && s.dead.After(at("08:45:00")) && g.rng.Intn(5) < 2:
			s.version = "3"
		}
		out = append(out, s)
	}
	return out
}

// plan is every entry of the incident, in the order the generator draws
// them: each step draws from the one random source, so their order is what
// keeps a rerun byte-identical.
func (g *gen) plan() []*spec {
	var specs []*spec
	for _, c := range []struct {
		category string
		n        int
	}{{"transient", 115}, {"schema", 42}, {"code-defect", 26}, {"permission", 21}, {"missing-reference", 32}, {"unknown", 16}} {
		specs = append(specs, g.regular(c.category, c.n)...)
	}
	g.markRedriven(specs)
	markLarge(specs)
	specs = append(specs, g.hints()...)
	specs = append(specs, g.conflicts()...)
	specs = append(specs, g.duplicates()...)
	specs = append(specs, g.malformed()...)
	g.chooseEncodings(specs)
	g.chooseFingerprints(specs)
	return specs
}

// markRedriven marks a few entries as already redriven once, at about
// 09:00, and come back.
func (g *gen) markRedriven(specs []*spec) {
	redriven := 0
	for _, i := range g.rng.Perm(len(specs)) {
		s := specs[i]
		if redriven < 8 && s.category == "transient" && s.dead.After(at("09:15:00")) {
			s.redrives = 1
			redriven++
		}
	}
}

// markLarge picks the large one: a globex B2B order whose authorization
// timed out.
func markLarge(specs []*spec) {
	large := specs[0]
	for _, s := range specs {
		if s.category == "transient" && s.topic == "orders" && s.order.Tenant == "globex" {
			large = s
			break
		}
	}
	large.role = "large"
}

// hints are entries with producer hints: error text no rule knows,
// error_class set by the producer.
func (g *gen) hints() []*spec {
	hints := []struct{ class, topic, text string }{
		{"transient", "payments", "payments adapter: upstream asked to back off (retry-after=30s)"},
		{"transient", "payments", "circuit breaker open for psp"},
		{"transient", "ledger", "ledger shard rebalancing, try again later"},
		{"transient", "orders", "payments call shed by load limiter"},
		{"missing-reference", "orders", "order lookup returned empty result"},
		{"missing-reference", "shipping", "referenced customer purged by GDPR job"},
		{"schema", "orders", "payload rejected by contract check orders-v3"},
		{"schema", "shipping", "producer emitted v3 payload under a v2 version tag"},
		{"permission", "ledger", "tenant globex suspended for ledger writes"},
		{"code-defect", "shipping", "consumer bug SHIP-2291: label builder returned an empty label"},
	}
	var specs []*spec
	for _, h := range hints {
		pool := g.live
		if h.class == "missing-reference" {
			pool = g.deleted
		}
		specs = append(specs, &spec{
			category: h.class, topic: h.topic, lastError: h.text, errorClass: h.class, role: "hint",
			order: pool[g.rng.Intn(len(pool))], eventID: g.eventID(), dead: g.timeIn([2]int{0, 119}),
			attempts: 1 + g.rng.Intn(6), encoding: "json", version: "2",
		})
	}
	return specs
}

// conflicts are three event IDs, each dead-lettered twice with a
// different payload.
func (g *gen) conflicts() []*spec {
	var specs []*spec
	c1 := g.eventID()
	o1 := g.live[g.rng.Intn(len(g.live))]
	specs = append(specs,
		&spec{category: "conflict", role: "conflict", topic: "orders", order: o1, eventID: c1, dead: at("08:38:21"),
			attempts: 7, encoding: "json", version: "2",
			lastError: "authorize payment for " + o1.ID + ": timeout calling payments: context deadline exceeded"},
		&spec{category: "conflict", role: "conflict", topic: "orders", order: o1, eventID: c1, dead: at("09:17:45"),
			attempts: 1, encoding: "json", version: "3", variant: "missing-currency",
			lastError: `missing field "currency"`},
	)
	c2 := g.eventID()
	o2 := g.live[g.rng.Intn(len(g.live))]
	specs = append(specs,
		&spec{category: "conflict", role: "conflict", topic: "payments", order: o2, eventID: c2, dead: at("08:52:09"),
			attempts: 9, encoding: "json", version: "2",
			lastError: "psp: 503 Service Unavailable: upstream connect error or disconnect/reset before headers"},
		&spec{category: "conflict", role: "conflict", topic: "payments", order: o2, eventID: c2, dead: at("09:26:30"),
			attempts: 6, encoding: "json", version: "2", amountCut: 500,
			lastError: "capture payment: context deadline exceeded"},
	)
	c3 := g.eventID()
	o3 := g.live[g.rng.Intn(len(g.live))]
	specs = append(specs,
		&spec{category: "conflict", role: "conflict", topic: "shipping", order: o3, eventID: c3, dead: at("08:49:02"),
			attempts: 5, encoding: "json", version: "2", variant: "nil-address",
			lastError: "panic: runtime error: invalid memory address or nil pointer dereference [signal SIGSEGV: segmentation violation code=0x1 addr=0x38 pc=0x9d42c1]"},
		&spec{category: "conflict", role: "conflict", topic: "shipping", order: o3, eventID: c3, dead: at("09:33:14"),
			attempts: 4, encoding: "json", version: "2",
			lastError: "carrier API: 503 Service Unavailable"},
	)
	return specs
}

// duplicates are plain duplicates: the producer published the same
// event twice.
func (g *gen) duplicates() []*spec {
	var specs []*spec
	dups := []struct{ topic, text, category, first, second string }{
		{"payments", "capture payment: context deadline exceeded", "transient", "08:31:07", "08:33:52"},
		{"payments", "dial tcp 10.20.7.31:443: i/o timeout", "transient", "09:02:40", "09:40:18"},
		{"orders", "authorize payment: payments-api: 429 Too Many Requests (retry-after: 5s)", "transient", "08:58:11", "09:01:36"},
		{"ledger", "403 Forbidden: token revoked", "permission", "09:10:55", "09:44:03"},
	}
	for _, d := range dups {
		o := g.live[g.rng.Intn(len(g.live))]
		first := &spec{category: d.category, role: "duplicate", topic: d.topic, order: o, eventID: g.eventID(),
			dead: at(d.first), attempts: g.attemptsFor(d.category), encoding: "json", version: "2", lastError: d.text}
		second := *first
		second.dead, second.attempts, second.dupOf = at(d.second), g.attemptsFor(d.category), first
		specs = append(specs, first, &second)
	}
	return specs
}

// malformed are the malformed files, each with one defect.
func (g *gen) malformed() []*spec {
	var specs []*spec
	for _, m := range []struct{ kind, at string }{
		{"truncated", "08:07:13"},
		{"no-event-id", "08:26:40"},
		{"bad-base64", "08:44:09"},
		{"attempts-string", "09:03:27"},
		{"bad-time", "09:11:50"},
		{"empty", "09:21:02"},
		{"array", "09:36:44"},
		{"bad-utf8", "09:52:31"},
	} {
		o := g.live[g.rng.Intn(len(g.live))]
		s := &spec{category: "malformed", role: "malformed", malformed: m.kind, topic: "payments", order: o,
			eventID: g.eventID(), dead: at(m.at), attempts: g.attemptsFor("transient"), encoding: "json", version: "2",
			lastError: "capture payment: context deadline exceeded"}
		switch m.kind {
		case "bad-base64":
			s.topic, s.encoding = "ledger", "base64"
			s.lastError = "403 Forbidden: token revoked"
		case "bad-utf8":
			s.topic = "orders"
			s.lastError = "Zahlungsdienst nicht erreichbar: Verbindung zurückgesetzt"
		}
		specs = append(specs, s)
	}
	return specs
}

func plainRegular(s *spec) bool {
	return s.role == "" && (s.category == "transient" || s.category == "permission" ||
		s.category == "missing-reference" || s.category == "unknown")
}

// chooseEncodings turns some payloads into text (legacy orders feed, carrier
// CSV manifests) and some ledger payloads into protobuf bytes.
func (g *gen) chooseEncodings(specs []*spec) {
	want := map[string]int{"orders": 10, "shipping": 9, "ledger": 7}
	for _, i := range g.rng.Perm(len(specs)) {
		s := specs[i]
		if !plainRegular(s) || want[s.topic] == 0 {
			continue
		}
		want[s.topic]--
		if s.topic == "ledger" {
			s.encoding = "base64"
		} else {
			s.encoding = "utf8"
		}
	}
}

func (g *gen) chooseFingerprints(specs []*spec) {
	for _, s := range specs {
		s.fpMode = "match"
	}
	need := []struct{ mode, encoding string }{{"none", "utf8"}, {"none", "base64"}}
	for i := 0; i < 13; i++ {
		need = append(need, struct{ mode, encoding string }{"none", "json"})
	}
	need = append(need, struct{ mode, encoding string }{"mismatch", "json"}, struct{ mode, encoding string }{"mismatch", "json"},
		struct{ mode, encoding string }{"mismatch", "json"}, struct{ mode, encoding string }{"md5", "json"}, struct{ mode, encoding string }{"md5", "utf8"})
	order := g.rng.Perm(len(specs))
	for _, n := range need {
		for _, i := range order {
			s := specs[i]
			if (s.role == "" || s.role == "hint") && s.fpMode == "match" && s.encoding == n.encoding {
				s.fpMode = n.mode
				break
			}
		}
	}
}

// ---------------------------------------------------------------- envelopes

type origin struct {
	Backend      string `json:"backend"`
	Topic        string `json:"topic"`
	Subscription string `json:"subscription"`
	Consumer     string `json:"consumer"`
}

type properties struct {
	Tenant  string `json:"tenant"`
	Region  string `json:"region"`
	TraceID string `json:"trace_id"`
}

// envelope is the canonical envelope form, docs/json.md, fields in its order.
type envelope struct {
	Schema          string          `json:"schema"`
	ID              string          `json:"id"`
	EventID         string          `json:"event_id,omitempty"`
	Fingerprint     string          `json:"fingerprint,omitempty"`
	PayloadVersion  string          `json:"payload_version"`
	ContentType     string          `json:"content_type"`
	Key             string          `json:"key"`
	Origin          origin          `json:"origin"`
	FirstReceivedAt string          `json:"first_received_at"`
	DeadLetteredAt  string          `json:"dead_lettered_at"`
	Attempts        any             `json:"attempts"`
	LastError       string          `json:"last_error"`
	ErrorClass      string          `json:"error_class"`
	Owner           string          `json:"owner"`
	RecoverBy       string          `json:"recover_by"`
	SchemaInfo      string          `json:"schema_info"`
	RedriveCount    int             `json:"redrive_count"`
	Properties      properties      `json:"properties"`
	PayloadEncoding string          `json:"payload_encoding"`
	Payload         json.RawMessage `json:"payload"`
}

type entry struct {
	spec *spec
	env  envelope
	dead time.Time
	raw  []byte // the bytes the fingerprint covers
}

type customerJSON struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Company string   `json:"company,omitempty"`
	Email   string   `json:"email"`
	Phone   string   `json:"phone"`
	Address *address `json:"address"`
}

type orderPayload struct {
	EventType string       `json:"eventType"`
	EventID   string       `json:"eventId"`
	OrderID   string       `json:"orderId"`
	Tenant    string       `json:"tenant"`
	CreatedAt string       `json:"createdAt"`
	Amount    any          `json:"amount"`
	Currency  string       `json:"currency,omitempty"`
	Customer  customerJSON `json:"customer"`
	Payment   struct {
		Method string `json:"method"`
		Card   card   `json:"card"`
	} `json:"payment"`
	Items []item `json:"items"`
}

type paymentPayload struct {
	EventType string `json:"eventType"`
	EventID   string `json:"eventId"`
	PaymentID string `json:"paymentId"`
	OrderID   string `json:"orderId"`
	Amount    int    `json:"amount"`
	Currency  string `json:"currency"`
	Card      struct {
		Brand  string `json:"brand"`
		Last4  string `json:"last4"`
		Holder string `json:"holder"`
	} `json:"card"`
	Billing struct {
		Email   string  `json:"email"`
		Phone   string  `json:"phone"`
		Address address `json:"address"`
	} `json:"billing"`
	IdempotencyKey string `json:"idempotencyKey"`
}

type parcel struct {
	Ref         string `json:"ref"`
	WeightGrams int    `json:"weightGrams"`
}

type shipmentPayload struct {
	EventType   string       `json:"eventType"`
	EventID     string       `json:"eventId"`
	ShipmentID  string       `json:"shipmentId"`
	OrderID     string       `json:"orderId"`
	Carrier     string       `json:"carrier"`
	Service     string       `json:"service"`
	Recipient   customerJSON `json:"recipient"`
	Parcels     []parcel     `json:"parcels"`
	WeightGrams *int         `json:"weightGrams,omitempty"`
}

type ledgerPayload struct {
	EventType     string `json:"eventType"`
	EventID       string `json:"eventId"`
	EntryID       string `json:"entryId"`
	OrderID       string `json:"orderId"`
	Account       string `json:"account"`
	Direction     string `json:"direction"`
	Amount        int    `json:"amount"`
	Currency      string `json:"currency"`
	CustomerEmail string `json:"customerEmail"`
}

// compact encodes v as compact JSON without HTML escaping: exactly the bytes
// json.Compact gives back from the indented file, so the fingerprint holds.
func compact(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func money(minor int) string { return fmt.Sprintf("%d.%02d", minor/100, minor%100) }

func (g *gen) customerJSON(o *order) customerJSON {
	a := o.Customer.Address
	return customerJSON{ID: o.Customer.ID, Name: o.Customer.Name, Company: o.Customer.Company,
		Email: o.Customer.Email, Phone: o.Customer.Phone, Address: &a}
}

func (g *gen) jsonPayload(s *spec) any {
	o := s.order
	amount := o.Amount - s.amountCut
	switch s.topic {
	case "orders":
		p := orderPayload{EventType: "OrderPlaced", EventID: s.eventID, OrderID: o.ID, Tenant: o.Tenant,
			CreatedAt: o.CreatedAt.Format(time.RFC3339), Amount: amount, Currency: o.Currency, Customer: g.customerJSON(o),
			Items: o.Items}
		p.Payment.Method, p.Payment.Card = "card", o.Card
		switch s.variant {
		case "amount-string":
			p.Amount = money(amount)
		case "missing-currency":
			p.Currency = ""
		case "three-items":
			p.Items = append([]item(nil), o.Items...)
			for len(p.Items) < 3 {
				p.Items = append(p.Items, item{SKU: fmt.Sprintf("SKU-%04d", 1000+g.rng.Intn(9000)), Name: g.pick(products), Qty: 1, UnitPrice: 999})
			}
			p.Items = p.Items[:3]
		}
		if s.role == "large" {
			p.Items = nil
			for i := 0; ; i++ {
				p.Items = append(p.Items, item{SKU: fmt.Sprintf("SKU-%05d", 20000+i), Name: "Industrial fastener M8x40, zinc plated (box of 100)",
					Qty: 10 + g.rng.Intn(490), UnitPrice: 250 + g.rng.Intn(4000), Warehouse: "us-east-dc2", Lot: fmt.Sprintf("L2026-11-%05d", g.rng.Intn(100000))})
				if len(compact(p)) >= largeMinBytes {
					break
				}
			}
			total := 0
			for _, it := range p.Items {
				total += it.Qty * it.UnitPrice
			}
			p.Amount = total
		}
		return p
	case "payments":
		p := paymentPayload{EventType: "PaymentCaptureRequested", EventID: s.eventID, PaymentID: derivedID("pay_", s.eventID),
			OrderID: o.ID, Amount: amount, Currency: o.Currency, IdempotencyKey: derivedID("idem_", s.eventID)}
		p.Card.Brand, p.Card.Last4, p.Card.Holder = o.Card.Brand, o.Card.Last4, o.Customer.Name
		p.Billing.Email, p.Billing.Phone, p.Billing.Address = o.Customer.Email, o.Customer.Phone, o.Customer.Address
		return p
	case "shipping":
		w := 0
		var parcels []parcel
		n := 1 + g.rng.Intn(2)
		if s.variant == "three-parcels" {
			n = 3
		}
		for i := 0; i < n; i++ {
			p := parcel{Ref: fmt.Sprintf("%s-P%d", o.ID, i+1), WeightGrams: 200 + g.rng.Intn(4800)}
			w += p.WeightGrams
			parcels = append(parcels, p)
		}
		p := shipmentPayload{EventType: "ShipmentRequested", EventID: s.eventID, ShipmentID: derivedID("shp_", s.eventID),
			OrderID: o.ID, Carrier: map[string]string{"acme": "dhl", "globex": "ups"}[o.Tenant], Service: "standard",
			Recipient: g.customerJSON(o), Parcels: parcels, WeightGrams: &w}
		switch s.variant {
		case "nil-address":
			p.Recipient.Address = nil
		case "missing-weight":
			p.WeightGrams = nil
		}
		return p
	case "ledger":
		return ledgerPayload{EventType: "LedgerEntryRequested", EventID: s.eventID, EntryID: derivedID("le_", s.eventID),
			OrderID: o.ID, Account: "revenue:" + o.Tenant + ":" + o.Region, Direction: "credit", Amount: amount,
			Currency: o.Currency, CustomerEmail: o.Customer.Email}
	}
	panic("unknown topic " + s.topic)
}

func (g *gen) textPayload(s *spec) string {
	o := s.order
	c := o.Customer
	if s.topic == "shipping" {
		return "shipment_id,order_id,carrier,recipient,phone,street,postcode,city,country\n" +
			fmt.Sprintf("%s,%s,%s,%s,%s,\"%s\",%s,%s,%s\n", derivedID("shp_", s.eventID), o.ID,
				map[string]string{"acme": "dhl", "globex": "ups"}[o.Tenant], c.Name, c.Phone, c.Address.Line1,
				c.Address.Postcode, c.Address.City, c.Address.Country)
	}
	return fmt.Sprintf("OrderPlaced %s tenant=%s amount=%s %s customer=%q email=%s phone=%q card=%s/%s",
		o.ID, o.Tenant, money(o.Amount), o.Currency, c.Name, c.Email, c.Phone, o.Card.Brand, o.Card.Last4)
}

// protoField appends one length-delimited protobuf field.
func protoField(b []byte, field int, v []byte) []byte {
	b = append(b, byte(field<<3|2))
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// ledgerProto is a ledger.v2 EntryRequested message in protobuf wire format:
// binary, with NUL bytes (the high bytes of a fixed64 milliseconds field)
// and bytes that are not UTF-8 (an opaque signature).
func (g *gen) ledgerProto(s *spec) []byte {
	o := s.order
	var b []byte
	b = protoField(b, 1, []byte(s.eventID))
	b = protoField(b, 2, []byte(derivedID("le_", s.eventID)))
	b = protoField(b, 3, []byte(o.ID))
	b = append(b, 4<<3)
	b = binary.AppendUvarint(b, uint64(o.Amount))
	b = protoField(b, 5, []byte(o.Currency))
	b = append(b, 6<<3|1)
	b = binary.LittleEndian.AppendUint64(b, uint64(o.CreatedAt.UnixMilli()))
	sig := make([]byte, 16)
	g.rng.Read(sig)
	sig[0], sig[1] = 0xff, 0xfe
	b = protoField(b, 7, sig)
	if utf8.Valid(b) || bytes.IndexByte(b, 0) < 0 {
		panic("ledger payload should be binary")
	}
	return b
}

func (g *gen) firstReceived(s *spec) time.Time {
	d := time.Duration(5+g.rng.Intn(90)) * time.Second
	for i := 1; i < s.attempts; i++ {
		d += time.Duration(min(1<<i, 60)) * time.Second
	}
	if s.redrives > 0 {
		d += time.Duration(25+g.rng.Intn(20)) * time.Minute
	}
	return s.dead.Add(-d)
}

var overdueOdds = map[string]int{"team-payments": 45, "team-shipping": 30, "team-orders": 15, "team-ledger": 10}

// recoverBy is either already past at 10:00 or at least a day away, never in
// between, so that the overdue set is the same for any clock on the incident
// day after 10:00.
func (g *gen) recoverBy(s *spec, owner string, first time.Time) time.Time {
	lo := first.Add(10 * time.Minute)
	hi := at("09:59:00")
	if s.role != "malformed" && lo.Before(hi) && g.rng.Intn(100) < overdueOdds[owner] {
		return lo.Add(time.Duration(g.rng.Int63n(int64(hi.Sub(lo)))) + time.Minute).Truncate(time.Minute)
	}
	return time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC).Add(time.Duration(g.rng.Intn(36*4)) * 15 * time.Minute)
}

func (g *gen) materialize(specs []*spec) ([]*entry, error) {
	var out []*entry
	for _, s := range specs {
		if s.dupOf != nil {
			continue
		}
		s.entry = g.build(s)
		out = append(out, s.entry)
	}
	for _, s := range specs {
		if s.dupOf == nil {
			continue
		}
		e := *s.dupOf.entry
		e.spec, e.dead = s, s.dead
		first := g.firstReceived(s)
		e.env.Attempts = s.attempts
		e.env.FirstReceivedAt = first.Format(time.RFC3339)
		e.env.DeadLetteredAt = s.dead.Format(time.RFC3339)
		e.env.RecoverBy = g.recoverBy(s, e.env.Owner, first).Format(time.RFC3339)
		e.env.Properties.TraceID = g.hex(32)
		e.env.Origin.Consumer = fmt.Sprintf("worker-%d", 1+g.rng.Intn(4))
		s.entry = &e
		out = append(out, &e)
	}
	return out, nil
}

func (g *gen) build(s *spec) *entry {
	o := s.order
	og := origins[s.topic]
	first := g.firstReceived(s)
	e := &entry{spec: s, dead: s.dead}
	e.env = envelope{
		Schema:          envelopeSchema,
		EventID:         s.eventID,
		PayloadVersion:  s.version,
		Key:             o.ID,
		Origin:          origin{Backend: "redis", Topic: s.topic, Subscription: og.group, Consumer: fmt.Sprintf("worker-%d", 1+g.rng.Intn(4))},
		FirstReceivedAt: first.Format(time.RFC3339),
		DeadLetteredAt:  s.dead.Format(time.RFC3339),
		Attempts:        s.attempts,
		LastError:       s.lastError,
		ErrorClass:      s.errorClass,
		Owner:           og.owner,
		RecoverBy:       g.recoverBy(s, og.owner, first).Format(time.RFC3339),
		SchemaInfo:      s.topic + ".v" + s.version,
		RedriveCount:    s.redrives,
		Properties:      properties{Tenant: o.Tenant, Region: o.Region, TraceID: g.hex(32)},
		PayloadEncoding: s.encoding,
	}
	switch s.encoding {
	case "json":
		e.raw = compact(g.jsonPayload(s))
		e.env.ContentType = "application/json"
		e.env.Payload = e.raw
	case "utf8":
		text := g.textPayload(s)
		e.raw = []byte(text)
		e.env.ContentType = "text/plain; charset=utf-8"
		if s.topic == "shipping" {
			e.env.ContentType = "text/csv; charset=utf-8"
		}
		e.env.Payload = compact(text)
	case "base64":
		e.raw = g.ledgerProto(s)
		e.env.ContentType = "application/x-protobuf; messageType=ledger.v2.EntryRequested"
		e.env.Payload = compact(base64.StdEncoding.EncodeToString(e.raw))
	}
	sum := sha256.Sum256(e.raw)
	switch s.fpMode {
	case "match":
		e.env.Fingerprint = "sha256:" + hex.EncodeToString(sum[:])
	case "mismatch":
		// The producer hashed its pretty-printed JSON, not the bytes it sent.
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, e.raw, "", "  "); err != nil {
			panic(err)
		}
		wrong := sha256.Sum256(pretty.Bytes())
		e.env.Fingerprint = "sha256:" + hex.EncodeToString(wrong[:])
	case "md5":
		m := md5.Sum(e.raw)
		e.env.Fingerprint = "md5:" + hex.EncodeToString(m[:])
	}
	switch s.malformed {
	case "no-event-id":
		e.env.EventID = ""
	case "bad-base64":
		e.env.Payload = compact("CgZldnQtNDIS!!not*base64==")
	case "attempts-string":
		e.env.Attempts = "five"
	case "bad-time":
		e.env.DeadLetteredAt = "yesterday"
	}
	return e
}

// ---------------------------------------------------------------- files

// latin1Marker stands in for the byte 0xFC (ü in Latin-1) until the file is
// written: encoding/json would replace an invalid byte with U+FFFD.
const latin1Marker = "@@LATIN1-FC@@"

func encodeFile(e *entry) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	var v any = e.env
	if e.spec.malformed == "array" {
		v = []envelope{e.env}
	}
	if e.spec.malformed == "bad-utf8" {
		e.env.LastError = strings.Replace(e.env.LastError, "ü", latin1Marker, 1)
		v = e.env
	}
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	b := buf.Bytes()
	switch e.spec.malformed {
	case "truncated":
		b = b[:len(b)*3/5] // a writer that died mid-file
	case "empty":
		b = nil
	case "bad-utf8":
		b = bytes.Replace(b, []byte(latin1Marker), []byte{0xfc}, 1)
	}
	return b
}

func write(out string, entries []*entry) error {
	errDir, inbox := filepath.Join(out, "error"), filepath.Join(out, "inbox")
	for _, d := range []string{errDir, inbox} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(inbox, ".gitkeep"), nil, 0o644); err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.WriteFile(filepath.Join(errDir, e.env.ID+".json"), encodeFile(e), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ---------------------------------------------------------------- checking

var categoryRules = []struct {
	name string
	re   *regexp.Regexp
}{
	{"schema", regexp.MustCompile(`(?i)schema|unmarshal|deserializ|cannot parse|parse error|invalid json|invalid format|required field|missing field`)},
	{"code-defect", regexp.MustCompile(`(?i)panic|nil pointer|null ?pointer|NullPointerException|index out of range|assertion failed|stack overflow`)},
	{"permission", regexp.MustCompile(`(?i)permission denied|forbidden|\b403\b|unauthori[sz]ed|\b401\b|access denied`)},
	{"missing-reference", regexp.MustCompile(`(?i)not found|no such|does not exist|was deleted|unknown (order|id|record|entity)`)},
	{"transient", regexp.MustCompile(`(?i)timeout|timed out|deadline exceeded|connection (refused|reset)|unavailable|\b50[234]\b|too many requests|\b429\b|temporar`)},
}

var categoryOrder = []string{"malformed", "conflict", "schema", "code-defect", "permission", "missing-reference", "transient", "unknown"}

func matchingRules(text string) []string {
	var names []string
	for _, r := range categoryRules {
		if r.re.MatchString(text) {
			names = append(names, r.name)
		}
	}
	return names
}

// fileEnvelope is how a reader strict about types sees a file.
type fileEnvelope struct {
	ID              string          `json:"id"`
	EventID         string          `json:"event_id"`
	Fingerprint     string          `json:"fingerprint"`
	Key             string          `json:"key"`
	FirstReceivedAt string          `json:"first_received_at"`
	DeadLetteredAt  string          `json:"dead_lettered_at"`
	Attempts        int             `json:"attempts"`
	LastError       string          `json:"last_error"`
	ErrorClass      string          `json:"error_class"`
	RecoverBy       string          `json:"recover_by"`
	RedriveCount    int             `json:"redrive_count"`
	PayloadEncoding string          `json:"payload_encoding"`
	Payload         json.RawMessage `json:"payload"`
}

type checked struct {
	id, eventID, key  string
	category, reason  string // reason: why malformed, or which rule matched
	fingerprint       string // carried or computed
	fpStatus          string
	encoding          string
	overdue, hint     bool
	payloadBytes      int
	redrives          int
	spec              *spec
	firstRecv, deadAt time.Time
}

func decodeFile(data []byte) (fileEnvelope, []byte, error) {
	var f fileEnvelope
	if len(data) == 0 {
		return f, nil, errors.New("empty file")
	}
	if !utf8.Valid(data) {
		return f, nil, errors.New("invalid UTF-8")
	}
	if !json.Valid(data) {
		return f, nil, errors.New("invalid JSON (truncated)")
	}
	if t := bytes.TrimSpace(data); t[0] != '{' {
		return f, nil, errors.New("not a JSON object")
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return f, nil, fmt.Errorf("unreadable field: %v", err)
	}
	if f.EventID == "" {
		return f, nil, errors.New("missing event_id")
	}
	for name, v := range map[string]string{"first_received_at": f.FirstReceivedAt, "dead_lettered_at": f.DeadLetteredAt, "recover_by": f.RecoverBy} {
		if _, err := time.Parse(time.RFC3339, v); err != nil {
			return f, nil, fmt.Errorf("%s: unparseable time %q", name, v)
		}
	}
	switch f.PayloadEncoding {
	case "json":
		var b bytes.Buffer
		if err := json.Compact(&b, f.Payload); err != nil {
			return f, nil, err
		}
		return f, b.Bytes(), nil
	case "utf8", "base64":
		var s string
		if err := json.Unmarshal(f.Payload, &s); err != nil {
			return f, nil, fmt.Errorf("payload: %v", err)
		}
		if f.PayloadEncoding == "utf8" {
			return f, []byte(s), nil
		}
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return f, nil, fmt.Errorf("payload: invalid base64: %v", err)
		}
		return f, raw, nil
	}
	return f, nil, fmt.Errorf("unknown payload_encoding %q", f.PayloadEncoding)
}

// verify reads every written entry back and checks that it decodes, and
// that the built-in rules categorize it as it was meant to be.
func verify(out string, entries []*entry) (*summary, error) {
	var cs []*checked
	for _, e := range entries {
		c, err := checkEntry(out, e)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	unique := markConflicts(cs)
	for _, c := range cs {
		if c.category != c.spec.category {
			return nil, fmt.Errorf("%s: categorized %s, meant %s", c.id, c.category, c.spec.category)
		}
	}
	return &summary{checked: cs, unique: len(unique)}, nil
}

// checkEntry reads e's file back: its times, attempts and fingerprint,
// and its category before conflicts are looked for.
func checkEntry(out string, e *entry) (*checked, error) {
	data, err := os.ReadFile(filepath.Join(out, "error", e.env.ID+".json"))
	if err != nil {
		return nil, err
	}
	c := &checked{id: e.env.ID, spec: e.spec, encoding: e.spec.encoding, redrives: e.spec.redrives}
	f, raw, err := decodeFile(data)
	if err != nil {
		c.category, c.reason = "malformed", err.Error()
		return c, nil
	}
	if f.ID != c.id {
		return nil, fmt.Errorf("%s: id %q is not the file name", c.id, f.ID)
	}
	c.eventID, c.key, c.payloadBytes = f.EventID, f.Key, len(raw)
	c.firstRecv, _ = time.Parse(time.RFC3339, f.FirstReceivedAt)
	c.deadAt, _ = time.Parse(time.RFC3339, f.DeadLetteredAt)
	recover, _ := time.Parse(time.RFC3339, f.RecoverBy)
	c.overdue = recover.Before(baseTime)
	if !c.firstRecv.Before(c.deadAt) || !c.deadAt.Before(baseTime) || c.deadAt.Before(incidentStart) {
		return nil, fmt.Errorf("%s: times out of order", c.id)
	}
	if f.Attempts < 1 || f.Attempts > 12 {
		return nil, fmt.Errorf("%s: attempts %d", c.id, f.Attempts)
	}
	if err := c.checkFingerprint(f.Fingerprint, raw, e.spec.fpMode); err != nil {
		return nil, err
	}
	if err := c.categorize(f); err != nil {
		return nil, err
	}
	return c, nil
}

// checkFingerprint sets the fingerprint the entry carries (or, carrying
// none, the one computed from raw) and whether it matches, and checks
// that against fpMode, what the generator meant.
func (c *checked) checkFingerprint(carried string, raw []byte, fpMode string) error {
	sum := sha256.Sum256(raw)
	computed := "sha256:" + hex.EncodeToString(sum[:])
	switch {
	case carried == "":
		c.fingerprint, c.fpStatus = computed, "computed"
	case !strings.HasPrefix(carried, "sha256:"):
		c.fingerprint, c.fpStatus = carried, "unverifiable"
	case carried == computed:
		c.fingerprint, c.fpStatus = carried, "match"
	default:
		c.fingerprint, c.fpStatus = carried, "mismatch"
	}
	if want := map[string]string{"match": "match", "none": "computed", "mismatch": "mismatch", "md5": "unverifiable"}[fpMode]; want != c.fpStatus {
		return fmt.Errorf("%s: fingerprint %s, meant %s", c.id, c.fpStatus, want)
	}
	return nil
}

// categorize gives the entry its category: the producer's error_class when
// it names a category, else the one rule its error matches. An error that
// matches two rules, or a hint that a rule also matches, is an error.
func (c *checked) categorize(f fileEnvelope) error {
	rules := matchingRules(f.LastError)
	known := false
	for _, n := range categoryOrder[2:] {
		known = known || n == f.ErrorClass
	}
	switch {
	case known:
		c.category, c.reason, c.hint = f.ErrorClass, "error_class", true
		if len(rules) != 0 {
			return fmt.Errorf("%s: hinted error %q also matches %v", c.id, f.LastError, rules)
		}
	case len(rules) == 0:
		c.category, c.reason = "unknown", "no rule"
	default:
		c.category, c.reason = rules[0], rules[0]
		if len(rules) > 1 {
			return fmt.Errorf("%s: %q matches %v", c.id, f.LastError, rules)
		}
	}
	return nil
}

// markConflicts recategorizes as conflicts the entries whose event ID
// carries more than one fingerprint, and returns each event ID's
// fingerprints.
func markConflicts(cs []*checked) map[string]map[string]bool {
	fps := map[string]map[string]bool{}
	for _, c := range cs {
		if c.category == "malformed" {
			continue
		}
		if fps[c.eventID] == nil {
			fps[c.eventID] = map[string]bool{}
		}
		fps[c.eventID][c.fingerprint] = true
	}
	for _, c := range cs {
		if c.category != "malformed" && len(fps[c.eventID]) > 1 {
			c.category, c.reason = "conflict", "distinct fingerprints"
		}
	}
	return fps
}

// ---------------------------------------------------------------- reporting

type summary struct {
	checked []*checked
	unique  int
}

func (s *summary) count(f func(*checked) bool) int {
	n := 0
	for _, c := range s.checked {
		if f(c) {
			n++
		}
	}
	return n
}

func (s *summary) ids(f func(*checked) bool) []string {
	var ids []string
	for _, c := range s.checked {
		if f(c) {
			ids = append(ids, c.id)
		}
	}
	return ids
}

// pairs lists, per event ID, the ids of the entries of one role.
func (s *summary) pairs(role string) []string {
	var lines []string
	byEvent := map[string][]string{}
	var events []string
	for _, c := range s.checked {
		if c.spec.role != role {
			continue
		}
		if byEvent[c.eventID] == nil {
			events = append(events, c.eventID)
		}
		byEvent[c.eventID] = append(byEvent[c.eventID], c.id)
	}
	for _, ev := range events {
		lines = append(lines, fmt.Sprintf("`%s`: `%s`", ev, strings.Join(byEvent[ev], "`, `")))
	}
	return lines
}

func (s *summary) print(w io.Writer) {
	fmt.Fprintf(w, "incidentgen: %d files, %d unique event ids, %d overdue\n", len(s.checked), s.unique, s.count(func(c *checked) bool { return c.overdue }))
	for _, cat := range categoryOrder {
		fmt.Fprintf(w, "  %-18s %3d (hint %d)\n", cat, s.count(func(c *checked) bool { return c.category == cat }),
			s.count(func(c *checked) bool { return c.category == cat && c.hint }))
	}
	for _, st := range []string{"match", "computed", "mismatch", "unverifiable"} {
		fmt.Fprintf(w, "  fingerprint %-12s %3d\n", st, s.count(func(c *checked) bool { return c.fpStatus == st }))
	}
	for _, enc := range []string{"json", "utf8", "base64"} {
		fmt.Fprintf(w, "  payload %-8s %3d\n", enc, s.count(func(c *checked) bool { return c.category != "malformed" && c.encoding == enc }))
	}
}

// readme is the incident's README.md: what happened, and the counts the
// check found.
func (s *summary) readme() string {
	var w mdText
	s.readmeIntro(&w)
	s.readmeCounts(&w)
	s.readmeLists(&w)
	s.readmeFingerprints(&w)
	return w.b.String()
}

// mdText is a README being written, a line at a time.
type mdText struct{ b strings.Builder }

func (w *mdText) p(format string, a ...any) { fmt.Fprintf(&w.b, format+"\n", a...) }

// codeList is ids as a comma-separated list of code spans.
func codeList(ids []string) string { return "`" + strings.Join(ids, "`, `") + "`" }

// readmeIntro writes the title, what the directory is, and the story.
func (s *summary) readmeIntro(w *mdText) {
	total := len(s.checked)
	w.p("# Sample incident: orders platform, 2026-11-29 08:00–10:00 UTC")
	w.p("")
	w.p("A directory queue for `--source dir:testdata/incident`: `error/` is the DLQ, %d files, one", total)
	w.p("canonical envelope each (docs/json.md); `inbox/` is the original destination and starts empty. File names are")
	w.p("`<dead_lettered_at>-<seq>.json`, so name order is dead-letter order, and `id` is the name without `.json`.")
	w.p("")
	w.p("Generated, do not edit by hand: change `internal/incidentgen` and run")
	w.p("`go run ./internal/incidentgen -out testdata/incident` (fixed seed and base time, byte-identical reruns;")
	w.p("it deletes and rewrites `error/` and `inbox/`, then checks every file against the built-in category rules).")
	w.p("")
	w.p("## What happened")
	w.p("")
	w.p("- 08:05 a purge job deleted orders whose events were still queued → `missing-reference`.")
	w.p("- 08:12–09:58 the payments dependency (and the PSP behind it) timed out, reset connections, answered")
	w.p("  503/504/429 → `transient`, mostly on `payments` and `orders`; ledger DB and carrier API blips too.")
	w.p("- 08:25 a shipping consumer deploy dereferences a nil recipient address → `code-defect`.")
	w.p("- 08:45 an orders-api deploy emits v3 payloads without `currency` or with `amount` as a string → `schema`.")
	w.p("- 09:02 the ledger service credential was revoked → `permission`.")
	w.p("- Business rejections no rule knows (inventory, fraud, coupon, state machine) → `unknown`.")
	w.p("")
	w.p("Origins are backend `redis`, streams `orders`, `payments`, `shipping`, `ledger` (groups `order-workers`,")
	w.p("`payment-workers`, `shipping-workers`, `ledger-writers`; consumers `worker-1..4`); owners `team-orders`,")
	w.p("`team-payments`, `team-shipping`, `team-ledger`; properties `tenant` (`acme`/`globex`), `region`, `trace_id`.")
	w.p("")
}

// readmeCounts writes the counts by category and the facts tests lean on.
func (s *summary) readmeCounts(w *mdText) {
	total := len(s.checked)
	overdue := s.count(func(c *checked) bool { return c.overdue })
	shared, most := s.sharedKeys()
	w.p("## Counts (the built-in category rules, applied in order)")
	w.p("")
	w.p("| category | files | of which by producer hint (`error_class`) |")
	w.p("|---|---|---|")
	for _, cat := range categoryOrder {
		w.p("| `%s` | %d | %d |", cat, s.count(func(c *checked) bool { return c.category == cat }),
			s.count(func(c *checked) bool { return c.category == cat && c.hint }))
	}
	w.p("| total | %d | %d unique event ids among the decodable files |", total, s.unique)
	w.p("")
	w.p("- Overdue (`recover_by` before 2026-11-29T10:00:00Z): %d. Every other `recover_by` is on 2026-11-30 or", overdue)
	w.p("  later, so any clock between 10:00 on the 29th and 08:00 on the 30th gives the same set (pin the clock in tests).")
	w.p("- Payloads: %d `json`, %d `utf8` (plain-text orders feed, carrier CSV), %d `base64` (protobuf bytes with NUL and",
		s.count(func(c *checked) bool { return c.category != "malformed" && c.encoding == "json" }),
		s.count(func(c *checked) bool { return c.category != "malformed" && c.encoding == "utf8" }),
		s.count(func(c *checked) bool { return c.category != "malformed" && c.encoding == "base64" }))
	w.p("  non-UTF-8 bytes). JSON payloads carry PII (customer name, email, phone, address, company, card last4).")
	for _, c := range s.checked {
		if c.spec.role == "large" {
			w.p("- Large payload: `%s`, %d bytes of compact JSON (an `items` array).", c.id, c.payloadBytes)
		}
	}
	w.p("- Keys: %d keys are shared by several entries (up to %d), so per-key order matters.", shared, most)
	w.p("- `redrive_count` 1 (already redriven once): %s.", codeList(s.ids(func(c *checked) bool { return c.redrives > 0 })))
	w.p("")
}

// sharedKeys is how many keys several entries share, and the most entries
// one key has.
func (s *summary) sharedKeys() (shared, most int) {
	keys := map[string]int{}
	for _, c := range s.checked {
		if c.key != "" {
			keys[c.key]++
		}
	}
	for _, n := range keys {
		if n > 1 {
			shared++
		}
		most = max(most, n)
	}
	return shared, most
}

// readmeLists writes the conflicts, the plain duplicates and the malformed
// files.
func (s *summary) readmeLists(w *mdText) {
	w.p("## Conflicts (same event_id, different payload and fingerprint)")
	w.p("")
	for _, l := range s.pairs("conflict") {
		w.p("- %s", l)
	}
	w.p("")
	w.p("## Plain duplicates (same event_id, same payload and fingerprint; not conflicts)")
	w.p("")
	for _, l := range s.pairs("duplicate") {
		w.p("- %s", l)
	}
	w.p("")
	w.p("## Malformed")
	w.p("")
	for _, c := range s.checked {
		if c.category == "malformed" {
			w.p("- `%s`: %s", c.id, map[string]string{
				"truncated":       "truncated JSON (writer died mid-file)",
				"no-event-id":     "valid envelope without `event_id`",
				"bad-base64":      "`payload_encoding: \"base64\"` with invalid base64",
				"attempts-string": "`attempts: \"five\"` (wrong type)",
				"bad-time":        "`dead_lettered_at: \"yesterday\"`",
				"empty":           "empty file",
				"array":           "a JSON array holding one envelope, not an object",
				"bad-utf8":        "Latin-1 byte 0xFC inside `last_error` (invalid UTF-8, so not JSON per RFC 8259)",
			}[c.spec.malformed])
		}
	}
	w.p("")
}

// readmeFingerprints writes the fingerprints by status and the producer
// hints.
func (s *summary) readmeFingerprints(w *mdText) {
	w.p("## Fingerprints")
	w.p("")
	w.p("Carried `sha256:` fingerprints cover the raw payload bytes: for `json` the payload as `json.Compact`")
	w.p("gives it from the file, for `utf8` the string's bytes, for `base64` the decoded bytes.")
	w.p("")
	w.p("- match: %d", s.count(func(c *checked) bool { return c.fpStatus == "match" }))
	w.p("- mismatch (producer hashed its pretty-printed JSON): %s", codeList(s.ids(func(c *checked) bool { return c.fpStatus == "mismatch" })))
	w.p("- unverifiable (`md5:`): %s", codeList(s.ids(func(c *checked) bool { return c.fpStatus == "unverifiable" })))
	w.p("- none carried (dlqctl computes it): %s", codeList(s.ids(func(c *checked) bool { return c.fpStatus == "computed" })))
	w.p("")
	w.p("## Producer hints")
	w.p("")
	for _, c := range s.checked {
		if c.hint {
			w.p("- `%s`: `error_class` `%s`", c.id, c.category)
		}
	}
}
