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
	// FewValues is how many words a position of a template may take and
	// still be part of the template: Groups splits a template at such a
	// position, and merges templates that differ in a leading token only
	// when it takes more.
	FewValues int
	// MaxVariants bounds the clusters of one template.
	MaxVariants int
}

// Default is the configuration dlqctl uses for every DLQ.
func Default() Config {
	return Config{Depth: 2, Similarity: 0.7, MaxChildren: 100, MaxTemplates: 5000, MaxPerLeaf: 200, FewValues: 3, MaxVariants: 64}
}

// Overflow is the template of the group that takes messages once the miner
// holds MaxTemplates templates and a message matches none of them.
const Overflow = "(not grouped: the template limit was reached)"

// Cluster is the finest set of messages the miner tells apart: the
// messages of one template that share the same word at each of its
// positions that has taken few words so far. Groups decides which clusters
// of a template stay apart.
type Cluster struct {
	// ID is the cluster's index, in order of creation.
	ID int
	// Count is how many messages joined it.
	Count int
	// Cut: at least one of its messages was longer than MaxErrorBytes.
	Cut bool
	// overflow: the group past the template limit.
	overflow bool
	tmpl     *template
	// words are its messages' words, one a position of tmpl: the literal
	// token, or varWord where the masker found a variable. Nil for the
	// cluster that takes a template's messages once it has too many.
	words []string
}

// varWord stands, in a cluster's words, for a token the masker made
// variable: whatever its punctuation, it is one value.
const varWord = "\x00"

// Template is the template of the cluster's template (before Groups splits
// it by the words that took few values), tokens joined by single spaces.
func (c *Cluster) Template() string {
	if c.overflow {
		return Overflow
	}
	return joinTokens(c.tmpl.tokens)
}

// IsOverflow says whether c is the overflow group.
func (c *Cluster) IsOverflow() bool { return c.overflow }

// template is what the tree and the similarity make: messages of one
// length whose tokens mostly repeat, generalised in place.
type template struct {
	tokens []token
	// variants finds the cluster of a message by the hash of its words
	// at the positions that are not wide.
	variants map[uint64][]*Cluster
	clusters []*Cluster
	// wide marks positions seen with more than FewValues words: a
	// variable for good, left out of the variants' hashes.
	wide      []bool
	nextCheck int
	// rest takes new messages once the template holds MaxVariants
	// clusters; a template with a rest is never split.
	rest *Cluster
}

type node struct {
	children  map[string]*node
	templates []*template
}

// Miner assigns messages to clusters, one message at a time. It is not safe
// for concurrent use.
type Miner struct {
	cfg       Config
	byLen     map[int]*node
	templates []*template
	clusters  []*Cluster
	overflow  *Cluster
	// seen remembers the cluster of messages met before: a DLQ repeats a
	// handful of errors many times, and a message met again joins the
	// cluster it joined the first time (whose template already holds it)
	// without being masked again. Bounded by seenBytes.
	seen      map[string]*Cluster
	seenBytes int
	// words is join's buffer for a message's words.
	words []string
}

// maxClustersPerTemplate bounds the clusters of the miner: so many times
// MaxTemplates.
const maxClustersPerTemplate = 4

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
	best, bestSim, bestVars := (*template)(nil), -1.0, -1
	for _, t := range leaf.templates {
		sim, vars := similarity(t.tokens, p.tokens)
		if sim > bestSim || sim == bestSim && vars > bestVars {
			best, bestSim, bestVars = t, sim, vars
		}
	}
	if best != nil && bestSim >= m.cfg.Similarity {
		merge(best.tokens, p.tokens)
		return m.join(best, p)
	}
	if len(m.templates) >= m.cfg.MaxTemplates || len(leaf.templates) >= m.cfg.MaxPerLeaf {
		if m.overflow == nil {
			m.overflow = &Cluster{ID: len(m.clusters), overflow: true}
			m.clusters = append(m.clusters, m.overflow)
		}
		m.overflow.Count++
		return m.overflow
	}
	t := &template{tokens: append([]token(nil), p.tokens...), variants: map[uint64][]*Cluster{},
		wide: make([]bool, len(p.tokens)), nextCheck: m.cfg.FewValues + 1}
	m.templates = append(m.templates, t)
	leaf.templates = append(leaf.templates, t)
	return m.join(t, p)
}

// join counts a message in the cluster of t that holds its words, made
// when there is none.
func (m *Miner) join(t *template, p Prepared) *Cluster {
	c := t.rest
	if c == nil {
		m.words = m.words[:0]
		for _, tk := range p.tokens {
			m.words = append(m.words, wordOf(tk))
		}
		if c = t.find(m.words); c == nil {
			c = m.newVariant(t, m.words)
		}
	}
	c.Count++
	c.Cut = c.Cut || p.Cut
	return c
}

// find is t's cluster that holds words at the positions that are not
// wide, or nil.
func (t *template) find(words []string) *Cluster {
	for _, c := range t.variants[t.hash(words)] {
		if t.same(c.words, words) {
			return c
		}
	}
	return nil
}

// newVariant makes t's cluster for a message's words, or its rest
// cluster once t holds MaxVariants clusters or the miner
// maxClustersPerTemplate per template it may hold.
func (m *Miner) newVariant(t *template, words []string) *Cluster {
	if len(t.clusters) >= t.nextCheck {
		m.widen(t)
		if c := t.find(words); c != nil {
			return c
		}
	}
	c := &Cluster{ID: len(m.clusters), tmpl: t}
	if len(t.clusters) >= m.cfg.MaxVariants || len(m.clusters) >= maxClustersPerTemplate*m.cfg.MaxTemplates {
		t.rest = c
	} else {
		c.words = ownWords(words)
		t.index(c)
	}
	m.clusters = append(m.clusters, c)
	t.clusters = append(t.clusters, c)
	return c
}

// ownWords copies words into one string of their own, so that they do not
// hold on to the message they came from.
func ownWords(words []string) []string {
	all, own := strings.Join(words, ""), make([]string, len(words))
	for i, w := range words {
		own[i], all = all[:len(w)], all[len(w):]
	}
	return own
}

// widen marks the positions of t whose clusters hold more than FewValues
// words, and indexes its clusters again without them, so that a template
// with a variable that is not masked does not make a cluster per value.
func (m *Miner) widen(t *template) {
	seen := map[string]bool{}
	for p := range t.tokens {
		if t.wide[p] {
			continue
		}
		clear(seen)
		for _, c := range t.clusters {
			if c.words != nil {
				seen[c.words[p]] = true
			}
		}
		t.wide[p] = len(seen) > m.cfg.FewValues
	}
	clear(t.variants)
	for _, c := range t.clusters {
		if c.words != nil {
			t.index(c)
		}
	}
	t.nextCheck = 2 * len(t.clusters)
}

// index files c under the hash of its words.
func (t *template) index(c *Cluster) {
	h := t.hash(c.words)
	t.variants[h] = append(t.variants[h], c)
}

// hash hashes a message's words, leaving out the wide positions.
func (t *template) hash(words []string) uint64 {
	h := uint64(fnvOffset)
	for i, wide := range t.wide {
		if !wide {
			h = hashToken(h, words[i])
		}
		h = hashToken(h, "")
	}
	return h
}

// same: a and b are the same words at every position of t that is not
// wide.
func (t *template) same(a, b []string) bool {
	for i, wide := range t.wide {
		if !wide && a[i] != b[i] {
			return false
		}
	}
	return true
}

// wordOf is a token's word in a cluster's words: a variable is one word
// whatever its punctuation, and a token of punctuation only ("()", "-") is
// an empty value where others have a variable, so it is that word too.
func wordOf(tk token) string {
	if tk.variable || !hasAlnum(tk.text) {
		return varWord
	}
	return tk.text
}

// hasAlnum: s holds a letter or a digit (or any non-ASCII rune).
func hasAlnum(s string) bool {
	for i := 0; i < len(s); i++ {
		if isWordByte(s[i]) && s[i] != '_' || s[i] >= 0x80 {
			return true
		}
	}
	return false
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
// message's token exactly, among the positions that say something: a
// variable in both says nothing, unless the words around the variables
// differ ("ready=<*>,policy=<*>" against "<*>"). vars counts the
// template's wildcards, which break ties.
func similarity(tmpl, msg []token) (float64, int) {
	same, vars, n := 0, 0, 0
	for i, t := range tmpl {
		if t.variable {
			vars++
			if msg[i].variable {
				if t.text != msg[i].text && (hasAlnum(t.text) || hasAlnum(msg[i].text)) {
					n++
				}
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

// Groups decides, after the pass, which clusters are one template. It
// splits a template at the positions where its messages took between two
// and FewValues words: an operation, a state, a component named among a
// few is part of what happened ("VM Paused", "VM Resumed"), while a word
// that takes many values is a variable the masker could not see (a user
// name). Then it merges templates that the tree kept apart but are one:
// those that came out equal, and those of one length that differ in one of
// the leading tokens only, when that position takes more than FewValues
// values (or is already a wildcard in one of them). The leading tokens
// route a message before any similarity is measured, so a variable there
// ("user alice is not allowed…", "user bob…") would otherwise split a
// template. It works on templates and clusters only, so its cost does not
// grow with the number of messages.
func (m *Miner) Groups() []Group {
	var parts []part
	for _, t := range m.templates {
		parts = m.split(t, parts)
	}
	if m.overflow != nil {
		parts = append(parts, part{clusters: []*Cluster{m.overflow}})
	}
	sets := newDisjointSets(len(parts))
	buckets, wild := m.mergeBuckets(parts)
	for k, ids := range buckets {
		if len(ids) < 2 || k.pos >= 0 && len(ids) <= m.cfg.FewValues && !wild[k] {
			continue
		}
		for _, id := range ids[1:] {
			sets.union(id, ids[0])
		}
	}
	byRoot := map[int]int{}
	var out []Group
	for i, pt := range parts {
		r := sets.find(i)
		gi, ok := byRoot[r]
		if !ok {
			gi = len(out)
			byRoot[r] = gi
			out = append(out, Group{overflow: pt.clusters[0].overflow, tokens: append([]token(nil), pt.tokens...)})
		} else {
			merge(out[gi].tokens, pt.tokens)
		}
		g := &out[gi]
		for _, c := range pt.clusters {
			g.Clusters = append(g.Clusters, c.ID)
			g.Count += c.Count
			g.Cut = g.Cut || c.Cut
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

// part is a template's clusters that share their words at the positions
// where it splits, and the template they make.
type part struct {
	tokens   []token
	clusters []*Cluster
}

// split appends t's parts to parts: its clusters by their words at each
// position that took between two and FewValues words (none when t has a
// rest cluster: what the rest holds is not known word by word).
func (m *Miner) split(t *template, parts []part) []part {
	var at []int
	if t.rest == nil && len(t.clusters) > 1 {
		seen := map[string]bool{}
		for p := range t.tokens {
			if t.wide[p] || !t.tokens[p].variable {
				continue
			}
			clear(seen)
			for _, c := range t.clusters {
				seen[c.words[p]] = true
			}
			if n := len(seen); n >= 2 && n <= m.cfg.FewValues {
				at = append(at, p)
			}
		}
	}
	if len(at) == 0 {
		return append(parts, part{tokens: t.tokens, clusters: t.clusters})
	}
	byKey := map[string]int{}
	var key strings.Builder
	for _, c := range t.clusters {
		key.Reset()
		for _, p := range at {
			key.WriteString(c.words[p])
			key.WriteByte(0)
		}
		i, ok := byKey[key.String()]
		if !ok {
			i = len(parts)
			byKey[key.String()] = i
			ts := append([]token(nil), t.tokens...)
			for _, p := range at {
				if w := c.words[p]; w != varWord {
					ts[p] = token{text: w}
				}
			}
			parts = append(parts, part{tokens: ts})
		}
		parts[i].clusters = append(parts[i].clusters, c)
	}
	return parts
}

// mergeKey names a bucket of parts that may be one template: those of
// n tokens whose tokens hash to h, all of them (pos -1) or all but the
// one at pos.
type mergeKey struct {
	n, pos int
	h      uint64
}

// mergeBuckets puts each part (but the overflow) in the bucket of its
// whole template and, for each of its leading Depth positions, in the
// bucket of its template without that token, unless too few literal
// tokens would be left. wild marks the buckets where a part has a
// wildcard at pos.
func (m *Miner) mergeBuckets(parts []part) (buckets map[mergeKey][]int, wild map[mergeKey]bool) {
	buckets = map[mergeKey][]int{}
	wild = map[mergeKey]bool{}
	for id, pt := range parts {
		if pt.clusters[0].overflow {
			continue
		}
		ts := pt.tokens
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
		buckets[whole] = append(buckets[whole], id)
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
			buckets[k] = append(buckets[k], id)
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
