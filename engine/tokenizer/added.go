package tokenizer

import "strings"

// addedToken is one entry of tokenizer.json's added_tokens, with the id HF
// assigns it.
type addedToken struct {
	content    string
	id         int32
	special    bool
	lstrip     bool
	rstrip     bool
	normalized bool
	singleWord bool
}

// addedMatcher finds added tokens in text the way HF's AddedVocabulary does:
// an Aho-Corasick search with leftmost-longest semantics over the token
// contents, scanned left to right without overlaps, then the single_word,
// lstrip and rstrip rules applied to each match.
type addedMatcher struct {
	toks  []*addedToken
	nodes []trieNode // nodes[0] is the root
	first [256]bool  // bytes that start some pattern
	only  int        // the single first byte when there is just one, else -1
}

type trieNode struct {
	edges []trieEdge // sorted by byte
	tok   int32      // index in toks of the pattern ending here, or -1
}

type trieEdge struct {
	b     byte
	child int32
}

// newAddedMatcher builds a matcher for toks, matching pattern(t) for each.
// Empty patterns are ignored (HF ignores empty added tokens); with duplicate
// patterns the first token wins.
func newAddedMatcher(toks []*addedToken, pattern func(*addedToken) string) *addedMatcher {
	m := &addedMatcher{nodes: []trieNode{{tok: -1}}, only: -1}
	firsts := 0
	for _, t := range toks {
		p := pattern(t)
		if p == "" {
			continue
		}
		if !m.first[p[0]] {
			m.first[p[0]] = true
			firsts++
			m.only = int(p[0])
		}
		n := int32(0)
		for i := 0; i < len(p); i++ {
			c := m.child(n, p[i])
			if c < 0 {
				c = int32(len(m.nodes))
				m.nodes = append(m.nodes, trieNode{tok: -1})
				m.insertEdge(n, p[i], c)
			}
			n = c
		}
		if m.nodes[n].tok < 0 {
			m.nodes[n].tok = int32(len(m.toks))
			m.toks = append(m.toks, t)
		}
	}
	if firsts != 1 {
		m.only = -1
	}
	return m
}

func (m *addedMatcher) empty() bool { return len(m.toks) == 0 }

func (m *addedMatcher) child(n int32, b byte) int32 {
	for _, e := range m.nodes[n].edges {
		if e.b == b {
			return e.child
		}
		if e.b > b {
			break
		}
	}
	return -1
}

func (m *addedMatcher) insertEdge(n int32, b byte, c int32) {
	es := append(m.nodes[n].edges, trieEdge{})
	i := len(es) - 1
	for i > 0 && es[i-1].b > b {
		es[i] = es[i-1]
		i--
	}
	es[i] = trieEdge{b, c}
	m.nodes[n].edges = es
}

// find returns the leftmost-longest match in s at or after pos, or tok < 0.
func (m *addedMatcher) find(s string, pos int) (start, end int, tok *addedToken) {
	for i := pos; i < len(s); i++ {
		if m.only >= 0 {
			j := strings.IndexByte(s[i:], byte(m.only))
			if j < 0 {
				return 0, 0, nil
			}
			i += j
		} else if !m.first[s[i]] {
			continue
		}
		best, bestEnd := int32(-1), 0
		n := int32(0)
		for j := i; j < len(s); j++ {
			if n = m.child(n, s[j]); n < 0 {
				break
			}
			if t := m.nodes[n].tok; t >= 0 {
				best, bestEnd = t, j+1
			}
		}
		if best >= 0 {
			return i, bestEnd, m.toks[best]
		}
	}
	return 0, 0, nil
}

// addedIter walks s as HF's find_matches does: each call to next returns the
// text between the previous token and the next one (possibly empty) and that
// token, or, at the end, the remaining text and a nil token.
type addedIter struct {
	m   *addedMatcher
	s   string
	pos int // where the Aho-Corasick scan resumes (end of the raw match)
	off int // end of the previous token's span (after rstrip)
}

func (it *addedIter) next() (gap string, tok *addedToken) {
	s := it.s
	for {
		ms, me, t := it.m.find(s, it.pos)
		if t == nil {
			gap = ""
			if it.off < len(s) {
				gap = s[it.off:]
			}
			it.off, it.pos = len(s), len(s)
			return gap, nil
		}
		it.pos = me
		if t.singleWord {
			startOK := ms == 0 || !endsWithWord(s[:ms])
			stopOK := me == len(s) || !startsWithWord(s[me:])
			if !startOK || !stopOK {
				continue
			}
		}
		start, stop := ms, me
		if t.lstrip {
			start = max(trailingSpaceStart(s[:start]), it.off)
		}
		if t.rstrip {
			stop += leadingSpaceLen(s[stop:])
		}
		if it.off < start {
			gap = s[it.off:start]
		}
		it.off = stop
		return gap, t
	}
}

func endsWithWord(s string) bool {
	r, _ := lastRune(s)
	return classOf(r)&clsW != 0
}

func startsWithWord(s string) bool {
	r, _ := decodeRune(s, 0)
	return classOf(r)&clsW != 0
}

// trailingSpaceStart returns where the trailing \s* of s begins.
func trailingSpaceStart(s string) int {
	for len(s) > 0 {
		r, n := lastRune(s)
		if classOf(r)&clsS == 0 {
			break
		}
		s = s[:len(s)-n]
	}
	return len(s)
}

// leadingSpaceLen returns the length of the leading \s* of s.
func leadingSpaceLen(s string) int {
	i := 0
	for i < len(s) {
		r, n := decodeRune(s, i)
		if classOf(r)&clsS == 0 {
			break
		}
		i += n
	}
	return i
}
