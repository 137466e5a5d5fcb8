package luapattern

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func find(t *testing.T, ctx context.Context, pat, s string) (start, end int, caps []Capture, ok bool, err error) {
	t.Helper()
	p, err := Compile(pat)
	if err != nil {
		return 0, 0, nil, false, err
	}
	m := p.NewMatcher(ctx, s)
	start, end, ok, err = m.Find(p, 0)
	if ok {
		caps = m.Captures()
	}
	return start, end, caps, ok, err
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pat, s string
		want   string // the match and its captures, "|"-separated; "-" none
	}{
		{"o w", "hello world", "o w"},
		{"^(%w+)%s*=%s*(%w+)$", "key = value", "key = value|key|value"},
		{"()ll()", "hello", "ll|@2|@4"},
		{"%b()", "x(a(b)c)y", "(a(b)c)"},
		{"(a+)%1", "xaaaa", "aaaa|aa"},
		{"[%a-]+", "ab-c1", "ab-c"},
		{"[a-c-e]+", "xb-ez", "b-e"},
		{"[]]+", "]]x", "]]"},
		{"[^%d%s]+", "12 ab3", "ab"},
		{"a-b", "aaab", "aaab"},
		{".-$", "abc", "abc"},
		{"a?b?c?$", "xabc", "abc"},
		{"^b", "ab", "-"},
		{"a$b", "a$b", "a$b"},
		{"%f", "gf", "f"}, // no frontier patterns: the letter f
		{"%Z+", "ab\x00", "ab"},
		{"[%w_]+", "-_x1-", "_x1"},
	} {
		start, end, caps, ok, err := find(t, context.Background(), c.pat, c.s)
		got := "-"
		if ok {
			parts := []string{c.s[start:end]}
			for _, cp := range caps {
				if cp.Position {
					parts = append(parts, "@"+string(rune('0'+cp.Start)))
				} else {
					parts = append(parts, c.s[cp.Start:cp.End])
				}
			}
			got = strings.Join(parts, "|")
		}
		if err != nil || got != c.want {
			t.Errorf("find(%q, %q) = %q, %v; want %q", c.s, c.pat, got, err, c.want)
		}
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []struct{ pat, s, want string }{
		{"[a", "", "malformed pattern (missing ']')"},
		{"x[%]", "", "malformed pattern (missing ']')"},
		{"(a", "", "unfinished capture"},
		{"a)", "", "invalid pattern capture"},
		{"%0", "", "invalid capture index"},
		{"a%1", "a", "invalid capture index"},
		{"(a%1)", "a", "invalid capture index"},
		{"(a)%2", "a", "invalid capture index"},
		{"a%", "a", "malformed pattern (ends with '%')"},
		{"a%bx", "a", "malformed pattern (missing arguments to '%b')"},
		// Faults that only matching finds are not errors where it does not
		// reach them.
		{"b%1", "a", ""},
		{"b%", "a", ""},
	} {
		_, _, _, _, err := find(t, context.Background(), c.pat, c.s)
		var pe *Error
		if c.want == "" && err != nil || c.want != "" && (!errors.As(err, &pe) || pe.Msg != c.want) {
			t.Errorf("find(%q, %q): err = %v, want %q", c.s, c.pat, err, c.want)
		}
	}
}

// TestDeadline: a pattern whose backtracking would run for hours stops
// soon after the context's deadline.
func TestDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, _, _, err := find(t, ctx, ".-.-.-.-.-.-x", strings.Repeat("a", 1000))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 150*time.Millisecond {
		t.Errorf("stopped after %s (deadline 50ms)", d)
	}
}

// TestTooComplex: deep recursion fails with ErrTooComplex, not a Go stack
// overflow, and the matcher can be used again.
func TestTooComplex(t *testing.T) {
	n := MaxDepth + 10
	_, _, _, _, err := find(t, context.Background(), strings.Repeat("a?", n), strings.Repeat("a", n))
	if !errors.Is(err, ErrTooComplex) {
		t.Fatalf("err = %v", err)
	}
	_, _, _, _, err = find(t, context.Background(), strings.Repeat("(", 1000)+"a"+strings.Repeat(")", 1000), "a")
	if err != nil {
		t.Fatalf("1000 nested captures: %v", err)
	}
}
