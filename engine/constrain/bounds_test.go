package constrain

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestIntegerBounds checks bounded integers against strconv on random
// numbers, and that every prefix the grammar takes has a completion within
// the bounds (so a model is never led into a number it cannot finish).
func TestIntegerBounds(t *testing.T) {
	cases := []struct {
		schema string
		lo, hi int64
	}{
		{`{"type":"integer","minimum":0,"maximum":100}`, 0, 100},
		{`{"type":"integer","minimum":-50,"maximum":-3}`, -50, -3},
		{`{"type":"integer","exclusiveMinimum":-1,"exclusiveMaximum":10}`, 0, 9},
		{`{"type":"integer","minimum":1.5,"maximum":7.9}`, 2, 7},
		{`{"type":"integer","minimum":5,"exclusiveMinimum":true,"maximum":9,"exclusiveMaximum":true}`, 6, 8},
		{`{"type":"integer","minimum":120}`, 120, math.MaxInt64},
		{`{"type":"integer","maximum":-7}`, math.MinInt64, -7},
		{`{"type":["integer","null"],"minimum":10,"maximum":10}`, 10, 10},
	}
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range cases {
		g := mustCompile(t, c.schema)
		hits := 0
		for i := 0; i < 4000; i++ {
			var doc string
			switch r.IntN(4) {
			case 0:
				doc = strconv.FormatInt(r.Int64N(400)-200, 10)
			case 1:
				doc = strconv.FormatInt(c.lo+r.Int64N(5)-2, 10)
			case 2:
				doc = strconv.FormatInt(r.Int64()-r.Int64(), 10)
			default:
				doc = []string{"-0", "0", "00", "-", "01", "1.0", "1e2", "9223372036854775808", "-9223372036854775809"}[r.IntN(9)]
			}
			v, err := strconv.ParseInt(doc, 10, 64)
			valid := err == nil && doc != "-" && (len(doc) < 2 || doc[0] != '0') && (len(doc) < 3 || doc[:2] != "-0")
			want := valid && v >= c.lo && v <= c.hi && v != math.MinInt64 // magnitudes are int64s
			at, done := feed(t, g, doc)
			if got := at < 0 && done; got != want {
				t.Fatalf("%s: %q accepted %v (failed at %d), want %v", c.schema, doc, got, at, want)
			}
			if want {
				hits++
			}
		}
		if hits == 0 {
			t.Fatalf("%s: no number in range was tried", c.schema)
		}
		// Every prefix taken is completable.
		for i := 0; i < 2000; i++ {
			p := strconv.FormatInt(r.Int64N(2000)-1000, 10)
			p = p[:1+r.IntN(len(p))]
			if at, _ := feed(t, g, p); at >= 0 {
				continue
			}
			if !completable(t, g, p, 4) {
				t.Fatalf("%s: the prefix %q was taken but has no completion within the bounds", c.schema, p)
			}
		}
	}
	if _, err := Compile([]byte(`{"type":"integer","minimum":3,"maximum":2}`)); err == nil {
		t.Fatal("empty bounds compiled")
	}
	if _, err := Compile([]byte(`{"type":"number","minimum":3}`)); err == nil {
		t.Fatal("bounds on a number compiled (not enforced there)")
	}
	if _, err := CompileLoose([]byte(`{"type":"number","minimum":3}`)); err != nil {
		t.Fatal(err)
	}
}

// completable reports whether p, or p and up to extra more digits, is a
// complete document of g.
func completable(t *testing.T, g *Grammar, p string, extra int) bool {
	if at, done := feed(t, g, p); at < 0 && done {
		return true
	}
	if extra == 0 {
		return false
	}
	for d := 0; d <= 9; d++ {
		q := p + fmt.Sprint(d)
		if at, _ := feed(t, g, q); at < 0 && completable(t, g, q, extra-1) {
			return true
		}
	}
	return false
}
