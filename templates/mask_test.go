package templates

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestPrepareMasks(t *testing.T) {
	cases := map[string]string{
		"fraud check rejected order order-99819 (score 0.97)":                   "fraud check rejected order <*> (score <*>)",
		"dial tcp 10.0.3.7:5432: connect: connection refused":                   "dial tcp <*>: connect: connection refused",
		"message 3f2b8c1e-9a4d-4c1b-8f3e-2a9d7c6b5e4f exceeded max":             "message <*> exceeded max",
		"open /var/lib/app/x.json: no such file or directory":                   "open <*>: no such file or directory",
		"POST https://api.example.com/v1/charges failed":                        "POST <*> failed",
		"customer ana@example.com has an unpaid invoice":                        "customer <*> has an unpaid invoice",
		"address 'Rue de la Paix' rejected by carrier":                          "address <*> rejected by carrier",
		`gift message "blue gift wrap" contains blocked words`:                  "gift message <*> contains blocked words",
		"lock not acquired within 1.5s":                                         "lock not acquired within <*>",
		"at 2026-11-29T08:00:00Z the job failed":                                "at <*> the job failed",
		"at 2026-11-29 08:00:00 the job failed":                                 "at <*> the job failed",
		"connection from 1.2.3.4 at Sun Jul 10 03:55:09 2005":                   "connection from <*> at <*>",
		"authentication failure; uid=0 euid=0 tty=NODEVssh ruser= rhost=x":      "authentication failure; uid=<*> euid=<*> tty=NODEVssh ruser= rhost=x",
		"rhost=csnsu.nsuok.edu user=root":                                       "rhost=<*> user=root",
		"session opened for user news by LOGIN(uid=0)":                          "session opened for user news by LOGIN(uid=<*>)",
		"ready=1,policy=3,wakefulness=1":                                        "ready=<*>,policy=<*>,wakefulness=<*>",
		"close, 1190 bytes (1.16 KB) sent, 0 bytes received, lifetime <1 sec":   "close, <*> sent, <*> received, lifetime <<*>",
		"reverse mapping for ns.marryaldkfaczcz.com failed":                     "reverse mapping for <*> failed",
		"class com.acme.shop.Order field order.id is missing":                   "class com.acme.shop.Order field order.id is missing",
		"invoice overdue by 3 days, reminder sent":                              "invoice overdue by <*>, reminder sent",
		"Killed process 12 (python3) total-vm:10kB":                             "Killed process <*> (<*>) total-vm:<*>",
		"connection from 1.2.3.4 () at noon":                                    "connection from <*> (<*>) at noon",
		`10.11.10.1 "GET /v2/54fa/servers/detail HTTP/1.1" status: 200`:         `<*> "GET <*>" status: <*>`,
		`HTTPSConnectionPool(host='api.psp.example', port=443): Read timed out`: "HTTPSConnectionPool(host=<*>, port=<*>): Read timed out",
		"pq: duplicate key value violates unique constraint \"orders_pkey\"":    "pq: duplicate key value violates unique constraint <*>",
		"token deadbeefcafebabe rejected":                                       "token <*> rejected",
		"onExtend:1514038530000 14 0 4":                                         "onExtend:<*> <*>",
		"the customer's order":                                                  "the customer's order",
		"read/write error in TCP/IP stack":                                      "read/write error in TCP/IP stack",
		"":                                                                      "",
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
	var a *Cluster
	for _, who := range []string{"alice", "bob", "carol", "dave", "erin"} {
		c := m.Add("refund for order order-1 rejected by approver " + who + ": over the limit")
		if a == nil {
			a = c
		}
	}
	c := m.Add("refund for order order-3 could not be loaded")
	if c.tmpl == a.tmpl {
		t.Error("a different message joined the template")
	}
	gs := m.Groups()
	if len(gs) != 2 || gs[0].Template != "refund for order <*> rejected by approver <*> over the limit" || gs[0].Count != 5 {
		t.Errorf("groups %+v, want the five refusals in one group with the approver as a variable", gs)
	}
}

// TestGroupsSplitFewWords: a word that takes a few values is part of the
// template; one that takes more is a variable.
func TestGroupsSplitFewWords(t *testing.T) {
	vm := func(states ...string) []string {
		m := New(Default())
		for i, s := range states {
			m.Add(fmt.Sprintf("[instance: %08x-0c1d] VM %s (Lifecycle Event)", i, s))
		}
		var out []string
		for _, g := range m.Groups() {
			out = append(out, fmt.Sprintf("%s=%d", g.Template, g.Count))
		}
		return out
	}
	got := vm("Started", "Paused", "Resumed", "Paused", "Resumed", "Started")
	want := []string{"[instance: <*>] VM Started (Lifecycle Event)=2", "[instance: <*>] VM Paused (Lifecycle Event)=2", "[instance: <*>] VM Resumed (Lifecycle Event)=2"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("three states: %q, want %q", got, want)
	}
	got = vm("Started", "Paused", "Resumed", "Stopped", "Paused")
	if want := []string{"[instance: <*>] VM <*> (Lifecycle Event)=5"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("four states: %q, want %q", got, want)
	}
}

// TestGroupsSplitKeepsClusters: every cluster the miner handed out is in
// exactly one group, and the groups count every message, on a corpus
// whose templates split.
func TestGroupsSplitKeepsClusters(t *testing.T) {
	_, msgs := readLabelled(t, filepath.Join("testdata", "dlqerrors.tsv"))
	m := New(Default())
	for _, s := range msgs {
		m.Add(s)
	}
	in := map[int]int{}
	total := 0
	for _, g := range m.Groups() {
		n := 0
		for _, id := range g.Clusters {
			in[id]++
			n += m.Clusters()[id].Count
		}
		if n != g.Count {
			t.Errorf("%q counts %d, its clusters %d", g.Template, g.Count, n)
		}
		total += g.Count
	}
	for _, c := range m.Clusters() {
		if in[c.ID] != 1 {
			t.Errorf("cluster %d is in %d groups", c.ID, in[c.ID])
		}
	}
	if total != len(msgs) {
		t.Errorf("groups count %d messages of %d", total, len(msgs))
	}
}

// TestMinerVariantsBounded: a template whose words take few values each
// in many combinations keeps at most MaxVariants clusters, and is then
// not split at all, since what its last cluster holds is not known word
// by word.
func TestMinerVariantsBounded(t *testing.T) {
	cfg := Default()
	m := New(cfg)
	words := []string{"red", "green", "blue"}
	n := 0
	for a := range words {
		for b := range words {
			for c := range words {
				for d := range words {
					for e := range words {
						m.Add(fmt.Sprintf("paint job failed: the colour %s and the finish %s and the primer %s and the coat %s and the brush %s were not in stock at the depot today",
							words[a], words[b], words[c], words[d], words[e]))
						n++
					}
				}
			}
		}
	}
	if got := len(m.Clusters()); got > cfg.MaxVariants+1 {
		t.Errorf("%d clusters for one template, bound %d", got, cfg.MaxVariants)
	}
	gs := m.Groups()
	want := "paint job failed: the colour <*> and the finish <*> and the primer <*> and the coat <*> and the brush <*> were not in stock at the depot today"
	if len(gs) != 1 || gs[0].Count != n || gs[0].Template != want {
		t.Errorf("%d groups, the first %q of %d, want one of %d", len(gs), gs[0].Template, gs[0].Count, n)
	}
}

func TestGroupsMergeLeadingVariable(t *testing.T) {
	m := New(Default())
	for _, u := range []string{"alice", "bob", "carol", "dave", "alice"} {
		m.Add("user " + u + " is not allowed to approve refunds above the limit")
	}
	m.Add("invoice ab12 already paid")
	m.Add("invoice cd34 already voided")
	gs := m.Groups()
	var tmpls []string
	for _, g := range gs {
		tmpls = append(tmpls, fmt.Sprintf("%s=%d", g.Template, g.Count))
	}
	want := "user <*> is not allowed to approve refunds above the limit=5|invoice <*> already paid=1|invoice <*> already voided=1"
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
	if got := len(m.Clusters()); got > maxClustersPerTemplate*cfg.MaxTemplates+1 {
		t.Errorf("%d clusters, cap %d", got, maxClustersPerTemplate*cfg.MaxTemplates)
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
	for _, s := range []string{"", "a", `"`, "0\n0", "a\x00b c", "a\x01 b", `x="a b" y='c`, "0 bytes (1 KB)", "() [] x=() (a=1,b=2)", `"GET /x HTTP/1.1"`, "order-1 (score 0.97)", "\xfc\xfd", "a=b=c", "(('''", strings.Repeat("x ", 3000)} {
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
		msgs := map[int][]string{ca.ID: {a}}
		msgs[cb.ID] = append(msgs[cb.ID], b)
		for _, g := range m.Groups() {
			if !utf8.ValidString(g.Template) {
				t.Errorf("template not UTF-8: %q", g.Template)
			}
			if g.IsOverflow() {
				continue
			}
			// The group's rule matches each of its messages.
			re := regexp.MustCompile(g.Pattern())
			for _, id := range g.Clusters {
				for _, msg := range msgs[id] {
					if msg := strings.ToValidUTF8(msg, "\uFFFD"); !re.MatchString(msg) {
						t.Errorf("%q: its group's rule %s does not match it", msg, g.Pattern())
					}
				}
			}
		}
		if p := Prepare(a); len(strings.Join(p.Tokens(), " ")) > 3*MaxErrorBytes {
			t.Errorf("prepared message grew past its bound")
		}
	})
}
