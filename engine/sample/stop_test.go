package sample

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

type stopCase struct {
	Name    string   `json:"name"`
	Stops   []string `json:"stops"`
	Include bool     `json:"include"`
	Text    string   `json:"text"`
	Emit    string   `json:"emit"` // everything emitted, Flush included
	Stopped bool     `json:"stopped"`
	Matched string   `json:"matched"`
}

// feedAll runs text through a fresh matcher in the given chunks and checks
// the streaming invariants at every step: what was emitted plus what is
// held is exactly what was fed, and the held text is the longest tail that
// is a proper prefix of a stop string.
func feedAll(t *testing.T, stops []string, include bool, chunks []string) (out string, stopped bool, matched string) {
	t.Helper()
	m := NewStopMatcher(stops)
	m.IncludeStop = include
	var fed, emitted strings.Builder
	for _, c := range chunks {
		fed.WriteString(c)
		e, st := m.Feed(c)
		emitted.WriteString(e)
		if st {
			if !m.Stopped() || m.Held() != "" || m.Flush() != "" {
				t.Fatalf("after a match: Stopped %v, held %q", m.Stopped(), m.Held())
			}
			if e2, st2 := m.Feed("more"); e2 != "" || !st2 {
				t.Fatalf("Feed after match = %q, %v", e2, st2)
			}
			return emitted.String(), true, m.Matched()
		}
		if emitted.String()+m.Held() != fed.String() {
			t.Fatalf("emitted %q + held %q != fed %q", emitted.String(), m.Held(), fed.String())
		}
		if want := naiveHeld(stops, fed.String()); m.Held() != want {
			t.Fatalf("held %q after %q, want %q", m.Held(), fed.String(), want)
		}
	}
	if m.Matched() != "" {
		t.Fatalf("Matched %q without a stop", m.Matched())
	}
	return emitted.String() + m.Flush(), false, ""
}

// naiveHeld is the longest suffix of s that is a proper prefix of a stop.
func naiveHeld(stops []string, s string) string {
	for j := 0; j < len(s); j++ {
		for _, st := range stops {
			if st != "" && len(s)-j < len(st) && strings.HasPrefix(st, s[j:]) {
				return s[j:]
			}
		}
	}
	return ""
}

// naiveStop finds the first stop to complete, byte by byte.
func naiveStop(stops []string, include bool, text string) (out string, stopped bool, matched string) {
	for end := 1; end <= len(text); end++ {
		best := ""
		for _, st := range stops {
			if st != "" && strings.HasSuffix(text[:end], st) && len(st) > len(best) {
				best = st
			}
		}
		if best != "" {
			if include {
				return text[:end], true, best
			}
			return text[:end-len(best)], true, best
		}
	}
	return text, false, ""
}

// chunkings returns several ways to split s: whole, bytes, runes, and
// random pieces.
func chunkings(s string, seed uint64) map[string][]string {
	out := map[string][]string{"whole": {s}}
	var bytes, runes []string
	for i := 0; i < len(s); i++ {
		bytes = append(bytes, s[i:i+1])
	}
	for i := 0; i < len(s); {
		_, n := utf8.DecodeRuneInString(s[i:])
		runes = append(runes, s[i:i+n])
		i += n
	}
	out["bytes"], out["runes"] = bytes, runes
	r := rand.New(rand.NewPCG(seed, 99))
	for k := range 3 {
		var parts []string
		for i := 0; i < len(s); {
			n := min(len(s)-i, 1+r.IntN(6))
			parts = append(parts, s[i:i+n])
			i += n
		}
		out["random"+string(rune('0'+k))] = parts
	}
	return out
}

func TestStopMatcherCases(t *testing.T) {
	raw, err := os.ReadFile("testdata/stop_cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []stopCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			ref, refStopped, refMatched := naiveStop(c.Stops, c.Include, c.Text)
			if ref != c.Emit || refStopped != c.Stopped || refMatched != c.Matched {
				t.Fatalf("test data disagrees with the naive reference: %q %v %q", ref, refStopped, refMatched)
			}
			for how, chunks := range chunkings(c.Text, uint64(i)) {
				out, stopped, matched := feedAll(t, c.Stops, c.Include, chunks)
				if out != c.Emit || stopped != c.Stopped || matched != c.Matched {
					t.Fatalf("fed %s: got %q stopped=%v matched=%q; want %q %v %q",
						how, out, stopped, matched, c.Emit, c.Stopped, c.Matched)
				}
			}
		})
	}
}

func TestStopMatcherHolds(t *testing.T) {
	m := NewStopMatcher([]string{"<|im_end|>"})
	steps := []struct{ in, emit, held string }{
		{"Hello <|im", "Hello ", "<|im"},
		{"_e", "", "<|im_e"},
		{"x", "<|im_ex", ""},
		{"<", "", "<"},
		{"<", "<", "<"},
	}
	for _, s := range steps {
		if e, st := m.Feed(s.in); e != s.emit || st || m.Held() != s.held {
			t.Fatalf("Feed(%q) = %q, %v, held %q; want %q, held %q", s.in, e, st, m.Held(), s.emit, s.held)
		}
	}
	m.Reset()
	if m.Held() != "" || m.Stopped() {
		t.Fatal("Reset kept state")
	}
	if e, st := m.Feed("a<|im_end|>"); e != "a" || !st {
		t.Fatalf("after Reset: %q %v", e, st)
	}
}

func TestStopMatcherNoAllocs(t *testing.T) {
	m := NewStopMatcher([]string{"<|im_end|>", "\n\nUser:"})
	n := testing.AllocsPerRun(100, func() {
		if e, _ := m.Feed(" token"); e != " token" {
			t.Fatal(e)
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per Feed", n)
	}
}

func TestStopTokens(t *testing.T) {
	var zero StopTokens
	if zero.Has(0) || zero.Len() != 0 {
		t.Fatal("zero value not empty")
	}
	small := NewStopTokens(151645, 151643, 151645)
	if small.Len() != 2 || !small.Has(151643) || !small.Has(151645) || small.Has(0) {
		t.Fatalf("small set %v", small.IDs())
	}
	var ids []int32
	for i := range int32(20) {
		ids = append(ids, i*7)
	}
	big := NewStopTokens(ids...)
	for i := range int32(140) {
		if big.Has(i) != (i%7 == 0) {
			t.Fatalf("Has(%d) = %v", i, big.Has(i))
		}
	}
}

// FuzzStopMatcher checks any stop strings against any text, fed in
// arbitrary pieces, against the byte-by-byte reference.
func FuzzStopMatcher(f *testing.F) {
	f.Add("STOP\x00\n\n", "Hello STOP world", uint64(1), false)
	f.Add("aab\x00ab", "aaab", uint64(2), true)
	f.Add("<|im_end|>", "x<|im_en<|im_end|>", uint64(3), false)
	f.Add("。\x00!", "你好。", uint64(4), false)
	f.Fuzz(func(t *testing.T, stopBlob, text string, seed uint64, include bool) {
		stops := strings.Split(stopBlob, "\x00")
		if len(stops) > 6 || len(text) > 512 {
			return
		}
		want, wantStopped, wantMatched := naiveStop(stops, include, text)
		for how, chunks := range chunkings(text, seed) {
			out, stopped, matched := feedAll(t, stops, include, chunks)
			if out != want || stopped != wantStopped || matched != wantMatched {
				t.Fatalf("stops %q text %q fed %s: got %q %v %q; want %q %v %q",
					stops, text, how, out, stopped, matched, want, wantStopped, wantMatched)
			}
			if !include {
				for _, st := range stops {
					if st != "" && strings.Contains(out, st) {
						t.Fatalf("emitted %q contains stop %q", out, st)
					}
				}
			}
		}
	})
}
