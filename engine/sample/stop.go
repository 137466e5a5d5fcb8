package sample

import (
	"slices"
	"strings"
)

// StopMatcher applies OpenAI stop strings to streamed text. Feed it the
// decoded text as it grows; it passes on what can no longer be part of a
// stop string and holds back the longest tail that could still begin one.
// On a match it releases the text before the stop string (and, with
// IncludeStop, the stop string itself) and nothing after.
//
// The first stop string to complete wins: the one whose occurrence ends
// earliest, and of those the longest. This is what feeding one byte at a
// time would find, so the result does not depend on how the text is split.
// Matching is on bytes; stop strings that are valid UTF-8 can only match
// at character boundaries of valid UTF-8 text.
type StopMatcher struct {
	// IncludeStop makes a match release the stop string too (vLLM's
	// include_stop_str_in_output). Set it before the first Feed.
	IncludeStop bool

	stops   []string
	first   [256]bool // first bytes of the stop strings
	longest int       // longest stop string, in bytes
	held    string
	matched int // index in stops; -1 while none
}

// NewStopMatcher returns a matcher for stops; empty strings are ignored.
// With no stop strings, Feed passes everything through.
func NewStopMatcher(stops []string) *StopMatcher {
	m := &StopMatcher{matched: -1}
	for _, s := range stops {
		if s != "" && !slices.Contains(m.stops, s) {
			m.stops = append(m.stops, s)
			m.first[s[0]] = true
			m.longest = max(m.longest, len(s))
		}
	}
	return m
}

// Feed appends text and returns what may be emitted now, and whether a stop
// string has matched (after which Feed returns "", true). The emitted text
// aliases text when nothing was held, so the common case allocates nothing.
func (m *StopMatcher) Feed(text string) (emit string, stopped bool) {
	if m.matched >= 0 {
		return "", true
	}
	if len(m.stops) == 0 {
		return text, false
	}
	s := text
	if m.held != "" {
		s = m.held + text
	}
	// A match must end inside text: the held part alone matched nothing.
	best, bestStart, bestEnd := -1, 0, 0
	for i, st := range m.stops {
		j := strings.Index(s, st)
		if j < 0 {
			continue
		}
		end := j + len(st)
		if best < 0 || end < bestEnd || (end == bestEnd && j < bestStart) {
			best, bestStart, bestEnd = i, j, end
		}
	}
	if best >= 0 {
		m.matched, m.held = best, ""
		if m.IncludeStop {
			return s[:bestEnd], true
		}
		return s[:bestStart], true
	}
	h := m.holdFrom(s)
	m.held = s[h:]
	return s[:h], false
}

// holdFrom returns the start of the longest suffix of s that is a proper
// prefix of some stop string (len(s) if none).
func (m *StopMatcher) holdFrom(s string) int {
	for j := max(0, len(s)-m.longest+1); j < len(s); j++ {
		if !m.first[s[j]] {
			continue
		}
		tail := s[j:]
		for _, st := range m.stops {
			if len(tail) < len(st) && strings.HasPrefix(st, tail) {
				return j
			}
		}
	}
	return len(s)
}

// Flush returns the held text, to be emitted when generation ends without
// a match (on a match there is nothing to flush), and empties it.
func (m *StopMatcher) Flush() string {
	h := m.held
	m.held = ""
	return h
}

// Held returns the text currently held back.
func (m *StopMatcher) Held() string { return m.held }

// Stopped reports whether a stop string has matched.
func (m *StopMatcher) Stopped() bool { return m.matched >= 0 }

// Matched returns the stop string that matched, or "" if none has (vLLM
// reports it as the choice's stop_reason).
func (m *StopMatcher) Matched() string {
	if m.matched < 0 {
		return ""
	}
	return m.stops[m.matched]
}

// Reset forgets held text and any match, keeping the stop strings.
func (m *StopMatcher) Reset() { m.held, m.matched = "", -1 }

// StopTokens is a set of token ids that end generation (EOS, <|im_end|>,
// the request's stop_token_ids). The zero value is the empty set.
type StopTokens struct{ ids []int32 }

// NewStopTokens returns the set of ids; duplicates are harmless.
func NewStopTokens(ids ...int32) StopTokens {
	s := slices.Clone(ids)
	slices.Sort(s)
	return StopTokens{ids: slices.Compact(s)}
}

// Has reports whether id is in the set.
func (s StopTokens) Has(id int32) bool {
	if len(s.ids) <= 8 { // the usual size: a scan beats a search
		return slices.Contains(s.ids, id)
	}
	_, ok := slices.BinarySearch(s.ids, id)
	return ok
}

// IDs returns the ids in ascending order; the slice must not be modified.
func (s StopTokens) IDs() []int32 { return s.ids }

// Len returns the number of ids.
func (s StopTokens) Len() int { return len(s.ids) }
