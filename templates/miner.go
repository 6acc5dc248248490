package templates

import (
	"strings"
)

// Config is the miner's one configuration. Default is what dlqctl uses;
// nothing is tuned per DLQ.
type Config struct {
	// Depth is how many leading tokens route a message down the tree
	// (after its token count).
	Depth int
	// Similarity is the share of a template's tokens a message must repeat
	// exactly to join it.
	Similarity float64
	// MaxChildren bounds the children of an inner node; past it, new tokens
	// share the wildcard child.
	MaxChildren int
	// MaxTemplates bounds the templates kept; past it, messages that match
	// none join one overflow group.
	MaxTemplates int
	// MaxPerLeaf bounds the templates compared with one message, so that a
	// DLQ where every error is unique costs linear time.
	MaxPerLeaf int
}

// Default is the configuration dlqctl uses for every DLQ.
func Default() Config {
	return Config{Depth: 2, Similarity: 0.7, MaxChildren: 100, MaxTemplates: 5000, MaxPerLeaf: 200}
}

// Overflow is the template of the group that takes messages once the miner
// holds MaxTemplates templates and a message matches none of them.
const Overflow = "(not grouped: the template limit was reached)"

// Cluster is one template and what the miner knows of it.
type Cluster struct {
	// ID is the cluster's index, in order of creation.
	ID     int
	tokens []token
	// Count is how many messages joined it.
	Count int
	// Cut: at least one of its messages was longer than MaxErrorBytes.
	Cut bool
	// overflow: the group past the template limit.
	overflow bool
}

// Template is the cluster's template, tokens joined by single spaces.
func (c *Cluster) Template() string {
	if c.overflow {
		return Overflow
	}
	return joinTokens(c.tokens)
}

// IsOverflow says whether c is the overflow group.
func (c *Cluster) IsOverflow() bool { return c.overflow }

type node struct {
	children map[string]*node
	clusters []*Cluster
}

// Miner assigns messages to clusters, one message at a time. It is not safe
// for concurrent use.
type Miner struct {
	cfg      Config
	byLen    map[int]*node
	clusters []*Cluster
	overflow *Cluster
	// seen remembers the cluster of messages met before: a DLQ repeats a
	// handful of errors many times, and a message met again joins the
	// cluster it joined the first time (whose template already holds it)
	// without being masked again. Bounded by seenBytes.
	seen      map[string]*Cluster
	seenBytes int
}

// seenMaxBytes bounds the text the miner remembers in seen.
const seenMaxBytes = 4 << 20

// New returns an empty miner.
func New(cfg Config) *Miner {
	return &Miner{cfg: cfg, byLen: map[int]*node{}, seen: map[string]*Cluster{}}
}

// Add mines one message and returns the cluster it joined.
func (m *Miner) Add(msg string) *Cluster {
	if c, ok := m.seen[msg]; ok {
		c.Count++
		return c
	}
	c := m.AddPrepared(Prepare(msg))
	if !c.overflow && m.seenBytes+len(msg) <= seenMaxBytes {
		m.seen[strings.Clone(msg)] = c
		m.seenBytes += len(msg)
	}
	return c
}

// AddPrepared mines a message that Prepare already masked.
func (m *Miner) AddPrepared(p Prepared) *Cluster {
	leaf := m.leaf(p.tokens)
	best, bestSim, bestVars := (*Cluster)(nil), -1.0, -1
	for _, c := range leaf.clusters {
		sim, vars := similarity(c.tokens, p.tokens)
		if sim > bestSim || sim == bestSim && vars > bestVars {
			best, bestSim, bestVars = c, sim, vars
		}
	}
	if best != nil && bestSim >= m.cfg.Similarity {
		merge(best.tokens, p.tokens)
		best.Count++
		best.Cut = best.Cut || p.Cut
		return best
	}
	if len(m.clusters) >= m.cfg.MaxTemplates || len(leaf.clusters) >= m.cfg.MaxPerLeaf {
		if m.overflow == nil {
			m.overflow = &Cluster{ID: len(m.clusters), overflow: true}
			m.clusters = append(m.clusters, m.overflow)
		}
		m.overflow.Count++
		return m.overflow
	}
	c := &Cluster{ID: len(m.clusters), tokens: append([]token(nil), p.tokens...), Count: 1, Cut: p.Cut}
	m.clusters = append(m.clusters, c)
	leaf.clusters = append(leaf.clusters, c)
	return c
}

// Clusters returns every cluster in order of creation (the overflow group
// among them when there is one).
func (m *Miner) Clusters() []*Cluster { return m.clusters }

// leaf finds (or makes) the leaf for a message: by token count, then by
// its first Depth tokens, variable tokens and tokens past MaxChildren going
// to the wildcard child.
func (m *Miner) leaf(ts []token) *node {
	n := m.byLen[len(ts)]
	if n == nil {
		n = &node{children: map[string]*node{}}
		m.byLen[len(ts)] = n
	}
	for d := 0; d < m.cfg.Depth && d < len(ts); d++ {
		key := ts[d].text
		if ts[d].variable {
			key = Wildcard
		}
		child := n.children[key]
		if child == nil {
			if len(n.children) >= m.cfg.MaxChildren-1 && key != Wildcard {
				key = Wildcard
				child = n.children[key]
			}
			if child == nil {
				child = &node{children: map[string]*node{}}
				n.children[key] = child
			}
		}
		n = child
	}
	return n
}

// similarity is the share of positions where the template repeats the
// message's token exactly, among the positions that are not variable in
// both (those say nothing either way); vars counts the template's
// wildcards, which break ties.
func similarity(tmpl, msg []token) (float64, int) {
	same, vars, n := 0, 0, 0
	for i, t := range tmpl {
		if t.variable {
			vars++
			if msg[i].variable {
				continue
			}
		} else if t.text == msg[i].text {
			same++
		}
		n++
	}
	if n == 0 {
		return 1, vars
	}
	return float64(same) / float64(n), vars
}

// merge generalises a template with a message that joined it: positions
// that differ become variable.
func merge(tmpl, msg []token) {
	for i := range tmpl {
		t, u := &tmpl[i], msg[i]
		switch {
		case t.variable:
			t.spans = t.spans || u.spans
			if t.text != u.text {
				t.text = Wildcard // "(<*>)" against "<*>," or "abc": keep no punctuation
			}
		case u.variable || t.text != u.text:
			t.text, t.variable, t.spans = Wildcard, true, u.spans
		}
	}
}

// Group is one or more clusters whose templates turned out to be one.
type Group struct {
	// Template is the merged template.
	Template string
	// Clusters are the IDs of the clusters it holds.
	Clusters []int
	// Count is the sum of their counts.
	Count int
	// Cut: one of its messages was longer than MaxErrorBytes.
	Cut      bool
	overflow bool
	tokens   []token
}

// IsOverflow says whether g is the overflow group.
func (g Group) IsOverflow() bool { return g.overflow }

// Groups merges, after the pass, clusters that the tree kept apart but that
// are one template: those whose templates came out equal, and those of one
// length that differ in one of the leading tokens only, when that position
// takes three or more values (or is already a wildcard in one of them).
// The leading tokens route a message before any similarity is measured, so
// a variable there ("user alice is not allowed…", "user bob…") would
// otherwise split a template; two values alone stay apart. It works on
// templates only, so its cost does not grow with the number of messages.
func (m *Miner) Groups() []Group {
	sets := newDisjointSets(len(m.clusters))
	buckets, wild := m.mergeBuckets()
	for k, ids := range buckets {
		if len(ids) < 2 || k.pos >= 0 && len(ids) < 3 && !wild[k] {
			continue
		}
		for _, id := range ids[1:] {
			sets.union(id, ids[0])
		}
	}
	byRoot := map[int]int{}
	var out []Group
	for _, c := range m.clusters {
		r := sets.find(c.ID)
		gi, ok := byRoot[r]
		if !ok {
			gi = len(out)
			byRoot[r] = gi
			out = append(out, Group{overflow: c.overflow, tokens: append([]token(nil), c.tokens...)})
		}
		g := &out[gi]
		g.Clusters = append(g.Clusters, c.ID)
		g.Count += c.Count
		g.Cut = g.Cut || c.Cut
		if len(g.Clusters) > 1 {
			merge(g.tokens, c.tokens)
		}
	}
	for i := range out {
		g := &out[i]
		if g.overflow {
			g.Template = Overflow
		} else {
			g.Template = joinTokens(g.tokens)
		}
	}
	return out
}

// mergeKey names a bucket of clusters that may be one template: those of
// n tokens whose tokens hash to h, all of them (pos -1) or all but the
// one at pos.
type mergeKey struct {
	n, pos int
	h      uint64
}

// mergeBuckets puts each cluster (but the overflow) in the bucket of its
// whole template and, for each of its leading Depth positions, in the
// bucket of its template without that token, unless too few literal
// tokens would be left. wild marks the buckets where a cluster has a
// wildcard at pos.
func (m *Miner) mergeBuckets() (buckets map[mergeKey][]int, wild map[mergeKey]bool) {
	buckets = map[mergeKey][]int{}
	wild = map[mergeKey]bool{}
	for _, c := range m.clusters {
		if c.overflow {
			continue
		}
		ts := c.tokens
		// prefix[i] hashes ts[:i], suffix[i] hashes ts[i:].
		prefix := make([]uint64, len(ts)+1)
		suffix := make([]uint64, len(ts)+1)
		prefix[0] = fnvOffset
		for i, t := range ts {
			prefix[i+1] = hashToken(prefix[i], t.text)
		}
		suffix[len(ts)] = fnvOffset
		for i := len(ts) - 1; i >= 0; i-- {
			suffix[i] = hashToken(suffix[i+1], ts[i].text)
		}
		whole := mergeKey{len(ts), -1, prefix[len(ts)]}
		buckets[whole] = append(buckets[whole], c.ID)
		literals := 0
		for _, t := range ts {
			if !t.variable {
				literals++
			}
		}
		for p := 0; p < len(ts) && p < m.cfg.Depth; p++ {
			if rest := literals - btoi(!ts[p].variable); rest < minLiterals {
				continue // too little left to say two templates are one
			}
			k := mergeKey{len(ts), p, prefix[p]*31 ^ suffix[p+1]}
			buckets[k] = append(buckets[k], c.ID)
			if ts[p].variable {
				wild[k] = true
			}
		}
	}
	return buckets, wild
}

// disjointSets is a union-find over cluster IDs 0..n-1.
type disjointSets []int

func newDisjointSets(n int) disjointSets {
	parent := make(disjointSets, n)
	for i := range parent {
		parent[i] = i
	}
	return parent
}

// find is i's set's root, halving the path on the way.
func (parent disjointSets) find(i int) int {
	for parent[i] != i {
		parent[i] = parent[parent[i]]
		i = parent[i]
	}
	return i
}

// union joins a's set into b's.
func (parent disjointSets) union(a, b int) { parent[parent.find(a)] = parent.find(b) }

// minLiterals is how many literal tokens two templates must share, besides
// the one position they differ in, for Groups to merge them.
const minLiterals = 2

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

const fnvOffset = 14695981039346656037

func hashToken(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	h ^= 0xff // token separator
	h *= 1099511628211
	return h
}

func joinTokens(ts []token) string {
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t.text)
	}
	return b.String()
}
