package server

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAppendString(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", `""`},
		{"plain", `"plain"`},
		{`q"b\`, `"q\"b\\"`},
		{"\n\r\t\x00\x1f", `"\n\r\t\u0000\u001f"`},
		{"<tag>&", `"<tag>&"`},
		{"é中😀", `"é中😀"`},
		{"bad\xffbyte", `"bad\ufffdbyte"`},
		{"\u2028\u2029", `"\u2028\u2029"`},
	}
	for _, c := range cases {
		if got := string(appendString(nil, c.in)); got != c.want {
			t.Errorf("appendString(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestAppendFloat(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{{-0.5, "-0.5"}, {0, "0"}, {math.Inf(-1), "-9999.0"}, {math.NaN(), "-9999.0"}, {1e-7, "1e-07"}} {
		if got := string(appendFloat(nil, c.f, 64)); got != c.want {
			t.Errorf("appendFloat(%v) = %s, want %s", c.f, got, c.want)
		}
	}
}

// FuzzAppendString: the output is valid JSON that decodes to the input
// (with invalid UTF-8 replaced, as encoding/json does).
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\x00\xff\u2028", "日本語<>&", "\\u0000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q → %s: %v", s, b, err)
		}
		if want := strings.ToValidUTF8(s, "\uFFFD"); utf8.ValidString(s) && got != s || !utf8.ValidString(s) && got != fixUTF8(s) {
			t.Fatalf("%q → %s → %q (want %q)", s, b, got, want)
		}
	})
}

// fixUTF8 replaces each invalid byte by U+FFFD (encoding/json's rule, and
// appendString's).
func fixUTF8(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func TestErrorJSON(t *testing.T) {
	b := appendErrorJSON(nil, &APIError{Status: 400, Message: "x \"y\"", Type: "invalid_request_error", Param: "messages[0]"})
	want := `{"error":{"message":"x \"y\"","type":"invalid_request_error","param":"messages[0]","code":null}}`
	if string(b) != want {
		t.Errorf("got %s\nwant %s", b, want)
	}
}
