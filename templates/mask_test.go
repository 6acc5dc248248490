package templates

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestPrepareMasks(t *testing.T) {
	cases := map[string]string{
		"fraud check rejected order order-99819 (score 0.97)":                "fraud check rejected order <*> (score <*>)",
		"dial tcp 10.0.3.7:5432: connect: connection refused":                "dial tcp <*>: connect: connection refused",
		"message 3f2b8c1e-9a4d-4c1b-8f3e-2a9d7c6b5e4f exceeded max":          "message <*> exceeded max",
		"open /var/lib/app/x.json: no such file or directory":                "open <*>: no such file or directory",
		"POST https://api.example.com/v1/charges failed":                     "POST <*> failed",
		"customer ana@example.com has an unpaid invoice":                     "customer <*> has an unpaid invoice",
		"address 'Rue de la Paix' rejected by carrier":                       "address <*> rejected by carrier",
		`gift message "blue gift wrap" contains blocked words`:               "gift message <*> contains blocked words",
		"lock not acquired within 1.5s":                                      "lock not acquired within <*>",
		"at 2026-11-29T08:00:00Z the job failed":                             "at <*> the job failed",
		"at 2026-11-29 08:00:00 the job failed":                              "at <*> the job failed",
		"connection from 1.2.3.4 at Sun Jul 10 03:55:09 2005":                "connection from <*> at <*>",
		"authentication failure; uid=0 euid=0 tty=NODEVssh ruser= rhost=x":   "authentication failure; uid=<*> euid=<*> tty=<*> ruser= rhost=<*>",
		"pq: duplicate key value violates unique constraint \"orders_pkey\"": "pq: duplicate key value violates unique constraint <*>",
		"token deadbeefcafebabe rejected":                                    "token <*> rejected",
		"onExtend:1514038530000 14 0 4":                                      "onExtend:<*> <*>",
		"the customer's order":                                               "the customer's order",
		"read/write error in TCP/IP stack":                                   "read/write error in TCP/IP stack",
		"":                                                                   "",
	}
	for in, want := range cases {
		if got := strings.Join(Prepare(in).Tokens(), " "); got != want {
			t.Errorf("Prepare(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPrepareBadInput(t *testing.T) {
	huge := strings.Repeat("é", MaxErrorBytes) // two bytes a rune: the cut falls inside one
	p := Prepare(huge)
	if !p.Cut {
		t.Error("a huge error was not marked cut")
	}
	if got := len(strings.Join(p.Tokens(), "")); got > MaxErrorBytes {
		t.Errorf("cut error keeps %d bytes, over %d", got, MaxErrorBytes)
	}
	for _, tk := range p.Tokens() {
		if !utf8.ValidString(tk) {
			t.Errorf("cut inside a rune: %q", tk)
		}
	}
	bad := Prepare("bad byte \xfc in here")
	if got := strings.Join(bad.Tokens(), " "); got != "bad byte <*> in here" {
		t.Errorf("invalid UTF-8: %q", got)
	}
	if got := Prepare(`unclosed "quote here`).Tokens(); len(got) != 3 {
		t.Errorf("an unclosed quote swallowed the rest: %q", got)
	}
}

func TestMinerGeneralises(t *testing.T) {
	m := New(Default())
	a := m.Add("state machine: cannot transition order order-1 from CANCELLED to SHIPPED")
	b := m.Add("state machine: cannot transition order order-2 from PAID to REFUNDED")
	if a != b {
		t.Fatal("two messages of one template went to two clusters")
	}
	if got := a.Template(); got != "state machine: cannot transition order <*> from <*> to <*>" {
		t.Errorf("template %q", got)
	}
	c := m.Add("state machine: cannot load order order-3")
	if c == a {
		t.Error("a different message joined the template")
	}
}

func TestGroupsMergeLeadingVariable(t *testing.T) {
	m := New(Default())
	for _, u := range []string{"alice", "bob", "carol", "alice"} {
		m.Add("user " + u + " is not allowed to approve refunds above the limit")
	}
	m.Add("invoice ab12 already paid")
	m.Add("invoice cd34 already voided")
	gs := m.Groups()
	var tmpls []string
	for _, g := range gs {
		tmpls = append(tmpls, fmt.Sprintf("%s=%d", g.Template, g.Count))
	}
	want := "user <*> is not allowed to approve refunds above the limit=4|invoice <*> already paid=1|invoice <*> already voided=1"
	if got := strings.Join(tmpls, "|"); got != want {
		t.Errorf("groups %s, want %s", got, want)
	}
}

// TestMinerBounded: a DLQ where every error is unique stays within the
// template cap and linear time.
func TestMinerBounded(t *testing.T) {
	cfg := Default()
	cfg.MaxTemplates = 300
	m := New(cfg)
	words := strings.Fields("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon phi chi psi omega")
	start := time.Now()
	const n = 50000
	for i := 0; i < n; i++ {
		// Unique words (no digits, so nothing is masked) in every position.
		var b strings.Builder
		for j, k := 0, i; j < 6; j++ {
			b.WriteString(words[k%len(words)])
			b.WriteString(words[(k/7+j)%len(words)])
			b.WriteByte(' ')
			k = k/len(words) + i*31 + j
		}
		m.Add(b.String())
	}
	if got := len(m.Clusters()); got > cfg.MaxTemplates+1 {
		t.Errorf("%d clusters, cap %d", got, cfg.MaxTemplates)
	}
	total := 0
	for _, g := range m.Groups() {
		total += g.Count
	}
	if total != n {
		t.Errorf("groups hold %d messages of %d", total, n)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("%d unique messages took %v", n, d)
	}
}

func FuzzMiner(f *testing.F) {
	for _, s := range []string{"", "a", `"`, `x="a b" y='c`, "order-1 (score 0.97)", "\xfc\xfd", "a=b=c", "(('''", strings.Repeat("x ", 3000)} {
		f.Add(s, "fraud check rejected order order-2 (score 0.91)")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		m := New(Default())
		ca, cb := m.Add(a), m.Add(b)
		ca2 := m.Add(a)
		if ca2 != ca && !ca.IsOverflow() {
			// The same message twice lands in one cluster: its template can
			// only have generalised to hold it.
			t.Errorf("%q went to two clusters", a)
		}
		_ = cb
		for _, g := range m.Groups() {
			if !utf8.ValidString(g.Template) {
				t.Errorf("template not UTF-8: %q", g.Template)
			}
		}
		if p := Prepare(a); len(strings.Join(p.Tokens(), " ")) > 3*MaxErrorBytes {
			t.Errorf("prepared message grew past its bound")
		}
	})
}
