package constrain

import (
	"encoding/json"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestStringConstraints checks pattern, minLength and maxLength against Go's
// regexp and rune counts on random strings, each written as JSON in random
// escapes.
func TestStringConstraints(t *testing.T) {
	cases := []struct {
		pattern  string
		min, max int
	}{
		{`^[A-Z][a-z]+$`, 0, -1},
		{`ab`, 0, -1},          // anywhere in the string
		{`^a.c`, 0, -1},        // . is not a newline
		{`(?i)^x+y?$`, 1, 3},   // case folding
		{`^\d{2,3}-é$`, 0, -1}, // counts and non-ASCII
		{`b$|^c`, 2, 5},
		{`^(ab|a)*\n?$`, 0, 4},
		{``, 1, 2},
		{`^[^a]*$`, 3, -1},
	}
	alphabet := []string{"a", "b", "c", "x", "X", "y", "A", "Z", "1", "2", "-", "é", "😀", "\n", "\"", "\\", "/", "\t"}
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range cases {
		schema := map[string]any{"type": "string"}
		if c.pattern != "" {
			schema["pattern"] = c.pattern
		}
		if c.min > 0 {
			schema["minLength"] = c.min
		}
		if c.max >= 0 {
			schema["maxLength"] = c.max
		}
		sb, _ := json.Marshal(schema)
		g := mustCompile(t, string(sb))
		re := regexp.MustCompile(c.pattern)
		seen := map[bool]int{}
		for i := 0; i < 3000; i++ {
			var b strings.Builder
			for n := r.IntN(7); n > 0; n-- {
				b.WriteString(alphabet[r.IntN(len(alphabet))])
			}
			if r.IntN(3) == 0 { // seed likelier matches
				b.WriteString([]string{"Ab", "ab", "abc", "x", "12-é", "b", "c"}[r.IntN(7)])
			}
			str := b.String()
			want := re.MatchString(str) && utf8.RuneCountInString(str) >= c.min && (c.max < 0 || utf8.RuneCountInString(str) <= c.max)
			doc := encodeRandomly(r, str)
			at, done := feed(t, g, doc)
			if got := at < 0 && done; got != want {
				t.Fatalf("%s: %s (%q): accepted %v (failed at %d), want %v", sb, doc, str, got, at, want)
			}
			seen[want]++
		}
		if seen[true] == 0 || seen[false] == 0 {
			t.Fatalf("%s: the random strings did not reach both outcomes (%v)", sb, seen)
		}
	}
}

// encodeRandomly writes s as a JSON string, escaping each character one of
// the ways JSON allows (surrogate pairs aside).
func encodeRandomly(r *rand.Rand, s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b.WriteString(`\` + string(c))
		case c == '\n':
			b.WriteString([]string{`\n`, `\u000a`, `\u000A`}[r.IntN(3)])
		case c == '\t':
			b.WriteString([]string{`\t`, `\u0009`}[r.IntN(2)])
		case c == '/' && r.IntN(2) == 0:
			b.WriteString(`\/`)
		case c < 0x10000 && r.IntN(4) == 0:
			const hex = "0123456789abcdef"
			b.WriteString(`\u` + string([]byte{hex[c>>12], hex[c>>8&15], hex[c>>4&15], hex[c&15]}))
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func TestPatternRefusesSurrogateEscapes(t *testing.T) {
	g := mustCompile(t, `{"type":"string","pattern":"."}`)
	if at, _ := feed(t, g, `"\ud83d\ude00"`); at < 0 {
		t.Fatal("a surrogate escape was taken in a pattern-constrained string")
	}
	if at, done := feed(t, g, `"😀"`); at >= 0 || !done {
		t.Fatal("the character itself was refused")
	}
}

// FuzzPattern compares a pattern-constrained string with Go's regexp on the
// same pattern and string.
func FuzzPattern(f *testing.F) {
	f.Add(`^[a-z]+\d?$`, "abc1")
	f.Add(`x|y$`, "ay")
	f.Add(`(?m)^b`, "a\nb")
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if len(pattern) > 40 || len(s) > 40 || !utf8.ValidString(s) {
			return
		}
		re, err := regexp.Compile(pattern)
		if err != nil {
			return
		}
		sb, _ := json.Marshal(map[string]any{"type": "string", "pattern": pattern})
		g, err := Compile(sb)
		if err != nil {
			return // \b, or a pattern the DFA refuses
		}
		doc, _ := json.Marshal(s)
		at, done := feed(t, g, string(doc))
		if got, want := at < 0 && done, re.MatchString(s); got != want {
			t.Fatalf("pattern %q on %q: accepted %v, regexp %v", pattern, s, got, want)
		}
	})
}

// TestPatternFailsEarly: a string stops at the first rune after which no
// match can follow, so that a model cannot write on in a string that may
// never close.
func TestPatternFailsEarly(t *testing.T) {
	cases := []struct {
		pattern, doc string
		failAt       int
	}{
		{`^[A-Z]{3}$`, `" of"`, 1},
		{`^[A-Z]{3}$`, `"ABCD"`, 4},
		{`^ab`, `"ax"`, 2},
		{`x$`, `"x\n`, -1}, // a match may still come
		{`^a$|^b`, `"ab"`, 2},
		{`^b|c`, `"ab`, -1}, // c may come anywhere
	}
	for _, c := range cases {
		sb, _ := json.Marshal(map[string]any{"type": "string", "pattern": c.pattern})
		g := mustCompile(t, string(sb))
		if at, _ := feed(t, g, c.doc); at != c.failAt {
			t.Errorf("%s on %s: failed at byte %d, want %d", c.pattern, c.doc, at, c.failAt)
		}
	}
}

func TestStringFormats(t *testing.T) {
	cases := []struct {
		format  string
		ok, bad []string
	}{
		{"date", []string{"2026-12-04"}, []string{"2026-13-01", "26-12-04", "2026-12-04T00:00:00Z"}},
		{"date-time", []string{"2026-12-04T18:25:31Z", "2026-12-04T18:25:31.5+01:00"}, []string{"2026-12-04", "2026-12-04T25:00:00Z"}},
		{"time", []string{"18:25:31Z"}, []string{"18:25"}},
		{"uuid", []string{"123e4567-e89b-12d3-a456-426614174000"}, []string{"123e4567e89b12d3a456426614174000"}},
		{"email", []string{"a.b@example.com"}, []string{"a@b", "@example.com", "a b@example.com"}},
		{"ipv4", []string{"192.168.0.1"}, []string{"256.1.1.1", "1.2.3"}},
		{"duration", []string{"P1DT2H"}, []string{"1D"}},
		{"uri", []string{"anything"}, nil}, // not enforced: an annotation
	}
	for _, c := range cases {
		quote := func(ss []string) (q []string) {
			for _, s := range ss {
				q = append(q, `"`+s+`"`)
			}
			return q
		}
		checkDocs(t, c.format, mustCompile(t, `{"type":"string","format":"`+c.format+`"}`), quote(c.ok), quote(c.bad))
	}
	// A pattern takes precedence over the format.
	g := mustCompile(t, `{"type":"string","format":"date","pattern":"^x$"}`)
	if at, done := feed(t, g, `"x"`); at >= 0 || !done {
		t.Error("the pattern did not take precedence over the format")
	}
}
