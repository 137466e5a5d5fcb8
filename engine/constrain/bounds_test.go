package constrain

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestIntegerBounds checks bounded integers against strconv on random
// numbers, and that every prefix the grammar takes has a completion within
// the bounds (so a model is never led into a number it cannot finish).
func TestIntegerBounds(t *testing.T) {
	cases := []struct {
		schema       string
		lo, hi, mult int64
	}{
		{`{"type":"integer","minimum":0,"maximum":100}`, 0, 100, 0},
		{`{"type":"integer","minimum":-50,"maximum":-3}`, -50, -3, 0},
		{`{"type":"integer","exclusiveMinimum":-1,"exclusiveMaximum":10}`, 0, 9, 0},
		{`{"type":"integer","minimum":1.5,"maximum":7.9}`, 2, 7, 0},
		{`{"type":"integer","minimum":5,"exclusiveMinimum":true,"maximum":9,"exclusiveMaximum":true}`, 6, 8, 0},
		{`{"type":"integer","minimum":120}`, 120, math.MaxInt64, 0},
		{`{"type":"integer","maximum":-7}`, math.MinInt64, -7, 0},
		{`{"type":["integer","null"],"minimum":10,"maximum":10}`, 10, 10, 0},
		{`{"type":"integer","multipleOf":7}`, math.MinInt64, math.MaxInt64, 7},
		{`{"type":"integer","minimum":-50,"maximum":100,"multipleOf":12}`, -50, 100, 12},
		{`{"type":"integer","minimum":101,"maximum":2000,"multipleOf":1000}`, 101, 2000, 1000},
		{`{"type":"integer","exclusiveMaximum":0,"multipleOf":5}`, math.MinInt64, -1, 5},
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
			if c.mult > 0 && i%2 == 0 { // multiples, in and out of the bounds
				doc = strconv.FormatInt(c.mult*(r.Int64N(40)-20), 10)
			}
			v, err := strconv.ParseInt(doc, 10, 64)
			valid := err == nil && doc != "-" && (len(doc) < 2 || doc[0] != '0') && (len(doc) < 3 || doc[:2] != "-0")
			want := valid && v >= c.lo && v <= c.hi && v != math.MinInt64 && (c.mult == 0 || v%c.mult == 0) // magnitudes are int64s
			hits += checkDoc(t, g, c.schema, doc, want)
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
	if _, err := Compile([]byte(`{"minimum":3}`)); err == nil {
		t.Fatal("bounds without a type compiled (not enforced there)")
	}
	if _, err := CompileLoose([]byte(`{"minimum":3}`)); err != nil {
		t.Fatal(err)
	}
}

// checkDoc fails t unless g takes doc as a whole document exactly when
// want; it returns 1 for a wanted document.
func checkDoc(t *testing.T, g *Grammar, schema, doc string, want bool) int {
	t.Helper()
	at, done := feed(t, g, doc)
	if got := at < 0 && done; got != want {
		t.Fatalf("%s: %q accepted %v (failed at %d), want %v", schema, doc, got, at, want)
	}
	if want {
		return 1
	}
	return 0
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

// TestNumberBounds checks bounded numbers (fractions allowed) against
// math/big on random decimals near and across the bounds, that exponents
// are refused, and that every prefix taken has a completion within the
// bounds.
func TestNumberBounds(t *testing.T) {
	cases := []struct {
		schema     string
		lo, hi     string // "" = none
		loEx, hiEx bool
	}{
		{`{"type":"number","minimum":0,"maximum":1}`, "0", "1", false, false},
		{`{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1}`, "0", "1", true, true},
		{`{"type":"number","minimum":-2.5,"maximum":-0.125}`, "-2.5", "-0.125", false, false},
		{`{"type":"number","minimum":0.3,"maximum":0.30001}`, "0.3", "0.30001", false, false},
		{`{"type":"number","minimum":1e2}`, "100", "", false, false},
		{`{"type":"number","exclusiveMaximum":-7.25}`, "", "-7.25", false, true},
		{`{"type":"number","minimum":5,"exclusiveMinimum":true,"maximum":5.5}`, "5", "5.5", true, false},
		{`{"type":["number","null"],"minimum":12.5,"maximum":12.5}`, "12.5", "12.5", false, false},
		{`{"type":"number","minimum":-1000,"maximum":1000}`, "-1000", "1000", false, false},
	}
	rat := func(s string) *big.Rat {
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("bad number %q", s)
		}
		return r
	}
	r := rand.New(rand.NewPCG(9, 10))
	randDec := func() string {
		var b strings.Builder
		if r.IntN(2) == 0 {
			b.WriteByte('-')
		}
		switch r.IntN(3) {
		case 0:
			b.WriteString("0")
		case 1:
			b.WriteString(strconv.Itoa(1 + r.IntN(20)))
		default:
			b.WriteString(strconv.Itoa(1 + r.IntN(3000)))
		}
		if r.IntN(2) == 0 {
			b.WriteByte('.')
			for i := 0; i < 1+r.IntN(6); i++ {
				b.WriteByte(byte('0' + r.IntN(10)))
			}
		}
		return b.String()
	}
	for _, c := range cases {
		g := mustCompile(t, c.schema)
		within := func(doc string) bool {
			v := rat(doc)
			if c.lo != "" {
				if k := v.Cmp(rat(c.lo)); k < 0 || k == 0 && c.loEx {
					return false
				}
			}
			if c.hi != "" {
				if k := v.Cmp(rat(c.hi)); k > 0 || k == 0 && c.hiEx {
					return false
				}
			}
			return true
		}
		hits := 0
		for i := 0; i < 4000; i++ {
			doc := randDec()
			if i%3 == 0 && c.lo != "" { // near the bounds
				doc = c.lo + []string{"", "0", "1", "00001", "9"}[r.IntN(5)]
				if !strings.Contains(c.lo, ".") && r.IntN(2) == 0 {
					doc = c.lo + ".0" + strconv.Itoa(r.IntN(10))
				}
			}
			want := plainNumber.MatchString(doc) && within(doc)
			hits += checkDoc(t, g, c.schema, doc, want)
		}
		if hits == 0 {
			t.Fatalf("%s: no number in range was tried", c.schema)
		}
		for _, doc := range []string{"1e1", "0.5e0", "1E2", "-1e-1"} {
			if at, _ := feed(t, g, doc); at < 0 {
				t.Fatalf("%s: %q (an exponent) taken", c.schema, doc)
			}
		}
		// Every prefix taken is completable.
		for i := 0; i < 1500; i++ {
			p := randDec()
			p = p[:1+r.IntN(len(p))]
			if at, _ := feed(t, g, p); at >= 0 {
				continue
			}
			if !completableDec(t, g, p, 6) {
				t.Fatalf("%s: the prefix %q was taken but has no completion within the bounds", c.schema, p)
			}
		}
	}
}

// plainNumber is a JSON number without an exponent.
var plainNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?$`)

// completableDec reports whether p, or p and up to extra more digits or a
// point (or a sign, first), is a complete document of g.
func completableDec(t *testing.T, g *Grammar, p string, extra int) bool {
	if at, done := feed(t, g, p); at < 0 && done {
		return true
	}
	if extra == 0 {
		return false
	}
	next := "0123456789."
	if p == "" {
		next += "-"
	}
	for _, b := range next {
		q := p + string(b)
		if at, _ := feed(t, g, q); at < 0 && completableDec(t, g, q, extra-1) {
			return true
		}
	}
	return false
}

func TestCmpDec(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 20000; i++ {
		a := dec{r.Int64N(2000000) - 1000000, r.IntN(50) - 25}
		b := dec{r.Int64N(2000000) - 1000000, r.IntN(50) - 25}
		if i%4 == 0 {
			b = dec{a.m * 10, a.x - 1} // equal values, other forms
		}
		ra := new(big.Rat).Mul(big.NewRat(a.m, 1), pow10Rat(a.x))
		rb := new(big.Rat).Mul(big.NewRat(b.m, 1), pow10Rat(b.x))
		if got, want := cmpDec(a, b), ra.Cmp(rb); got != want {
			t.Fatalf("cmpDec(%v, %v) = %d, want %d", a, b, got, want)
		}
	}
	for _, s := range []string{"0", "-0.0", "12.50", "1e-3", "-7.25E+2", "100", "0.000123"} {
		d, err := parseDec(s)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := new(big.Rat).SetString(s)
		got := new(big.Rat).Mul(big.NewRat(d.m, 1), pow10Rat(d.x))
		if got.Cmp(want) != 0 {
			t.Fatalf("parseDec(%q) = %v", s, d)
		}
	}
}

func pow10Rat(x int) *big.Rat {
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(x))), nil)
	if x < 0 {
		return new(big.Rat).SetFrac(big.NewInt(1), p)
	}
	return new(big.Rat).SetInt(p)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// FuzzNumberBounds: a bounded number takes exactly the plain decimals
// within its bounds (big.Rat the oracle), and every prefix it takes can
// still be completed.
func FuzzNumberBounds(f *testing.F) {
	for _, s := range [][3]string{{"0", "1", "0.5"}, {"-2.5", "-0.125", "-0.13"}, {"1e2", "", "100.0"}, {"", "-7.25", "-7.2500001"}, {"0.3", "0.30001", "0.300001"}} {
		f.Add(s[0], s[1], s[2], false)
	}
	f.Fuzz(func(t *testing.T, lo, hi, doc string, excl bool) {
		if lo == "" && hi == "" || strings.ContainsAny(doc, " \t\n\r") {
			return // unbounded: exponents allowed; whitespace around the root (both checkAgainstStd's)
		}
		schema := `{"type":"number"`
		for _, b := range []struct{ key, v string }{{"minimum", lo}, {"maximum", hi}} {
			if b.v == "" {
				continue
			}
			if _, ok := new(big.Rat).SetString(b.v); !ok || !jsonNumber.MatchString(b.v) || len(b.v) > 16 {
				return // (long bounds can leave no room for digits between them: not checked)
			}
			key := b.key
			if excl {
				key = "exclusive" + strings.ToUpper(key[:1]) + key[1:]
			}
			schema += `,"` + key + `":` + b.v
		}
		g, err := Compile([]byte(schema + "}"))
		if err != nil {
			return // empty bounds, or too many digits
		}
		if digits := strings.TrimLeft(strings.NewReplacer("-", "", ".", "").Replace(doc), "0"); len(digits) > maxDecDigits || len(doc) > maxNumberLen {
			return // beyond a bounded number's digits, or any number's length
		}
		want := plainNumber.MatchString(doc)
		if want {
			v, _ := new(big.Rat).SetString(doc)
			for i, b := range []string{lo, hi} {
				if b == "" {
					continue
				}
				r, _ := new(big.Rat).SetString(b)
				k := v.Cmp(r)
				if i == 1 {
					k = -k
				}
				if k < 0 || k == 0 && excl {
					want = false
				}
			}
		}
		at, done := feed(t, g, doc)
		if got := at < 0 && done; got != want {
			t.Fatalf("%s: %q accepted %v (failed at %d), want %v", schema, doc, got, at, want)
		}
		if at < 0 && numberPrefix.MatchString(doc) && len(doc) < 20 && !completableDec(t, g, doc, 20) {
			t.Fatalf("%s: the prefix %q was taken but has no completion within the bounds", schema, doc)
		}
	})
}

// numberPrefix is what a plain number may start with.
var numberPrefix = regexp.MustCompile(`^-?([0-9]+(\.[0-9]*)?)?$`)

// jsonNumber is a JSON number.
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)
