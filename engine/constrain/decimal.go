package constrain

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// A bounded number (not only integers) is written without an exponent, so
// that the digits so far describe an interval of values: "12" can become
// 12, 12.x or 12 followed by more digits; "12.3" stays within [12.3, 12.4).
// A digit is allowed only if that interval meets the bounds. Values are
// exact decimals: no rounding decides a boundary.

// dec is the decimal m·10^x.
type dec struct {
	m int64
	x int
}

// maxDecDigits is the most significant digits of a bound, and of the
// mantissa of a bounded number being written.
const maxDecDigits = 18

// parseDec reads a JSON number exactly, or fails when it has more than
// maxDecDigits significant digits or an exponent beyond ±300.
func parseDec(s string) (dec, error) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || e < -300 || e > 300 {
			return dec{}, fmt.Errorf("exponent out of range")
		}
		exp, s = e, s[:i]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= len(frac)
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	if len(trimmed) > maxDecDigits {
		return dec{}, fmt.Errorf("more than %d significant digits", maxDecDigits)
	}
	if trimmed == "" {
		return dec{}, nil
	}
	m, err := strconv.ParseInt(trimmed, 10, 64)
	if err != nil {
		return dec{}, err
	}
	if neg {
		m = -m
	}
	return dec{m, exp}, nil
}

var pow10u = func() (p [20]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

func ndigits(m uint64) int {
	n := 1
	for m >= 10 {
		m /= 10
		n++
	}
	return n
}

func abs64(m int64) uint64 {
	if m < 0 {
		return uint64(-m)
	}
	return uint64(m)
}

func sign(m int64) int {
	switch {
	case m < 0:
		return -1
	case m > 0:
		return 1
	}
	return 0
}

// cmpDec compares a and b exactly: -1, 0 or 1.
func cmpDec(a, b dec) int {
	sa, sb := sign(a.m), sign(b.m)
	if sa != sb {
		if sa < sb {
			return -1
		}
		return 1
	}
	if sa == 0 {
		return 0
	}
	ma, mb := abs64(a.m), abs64(b.m)
	// The orders of magnitude first; equal ones leave exponents at most
	// 18 apart, so the aligned mantissas fit 128 bits.
	oa, ob := ndigits(ma)+a.x, ndigits(mb)+b.x
	r := 0
	switch {
	case oa < ob:
		r = -1
	case oa > ob:
		r = 1
	default:
		var hi, lo, other uint64
		flip := 1
		if a.x >= b.x {
			hi, lo = bits.Mul64(ma, pow10u[a.x-b.x])
			other = mb
		} else {
			hi, lo = bits.Mul64(mb, pow10u[b.x-a.x])
			other, flip = ma, -1
		}
		switch {
		case hi > 0 || lo > other:
			r = flip
		case lo < other:
			r = -flip
		}
	}
	return r * sa
}

// numBounds are a number's bounds (has*: present; *Ex: exclusive).
type numBounds struct {
	lo, hi       dec
	hasLo, hasHi bool
	loEx, hiEx   bool
}

// end is one end of an interval of values (inf: unbounded on that side).
type end struct {
	v    dec
	open bool
	inf  bool
}

// meets reports whether the interval from a to b (a ≤ b) has a value
// within the bounds.
func (nb *numBounds) meets(a, b end) bool {
	lo, hi := a, b
	if nb.hasLo && (lo.inf || cmpDec(nb.lo, lo.v) > 0 || cmpDec(nb.lo, lo.v) == 0 && nb.loEx) {
		lo = end{v: nb.lo, open: nb.loEx}
	}
	if nb.hasHi && (hi.inf || cmpDec(nb.hi, hi.v) < 0 || cmpDec(nb.hi, hi.v) == 0 && nb.hiEx) {
		hi = end{v: nb.hi, open: nb.hiEx}
	}
	if lo.inf || hi.inf {
		return true
	}
	c := cmpDec(lo.v, hi.v)
	return c < 0 || c == 0 && !lo.open && !hi.open
}

func (nb *numBounds) contains(v dec) bool {
	p := end{v: v}
	return nb.meets(p, p)
}

// decFeasible reports whether some number that starts with what the lexer
// has read lies within its node's bounds.
func (l *lexer) decFeasible() bool {
	nb := l.num.nb
	if l.sub == numMinus {
		return nb.meets(end{inf: true}, end{})
	}
	// The magnitude's intervals, then their mirror for a negative number.
	check := func(a, b dec, bOpen bool) bool {
		lo, hi := end{v: a}, end{v: b, open: bOpen}
		if l.neg {
			lo, hi = end{v: dec{-b.m, b.x}, open: bOpen}, end{v: dec{-a.m, a.x}}
		}
		return nb.meets(lo, hi)
	}
	full := l.val > (math.MaxInt64-9)/10 // no digit may follow
	switch l.sub {
	case numZero:
		return check(dec{}, dec{1, 0}, !full)
	case numDot, numFrac:
		x := -int(l.frac)
		if full {
			return l.sub == numFrac && check(dec{l.val, x}, dec{l.val, x}, false)
		}
		return check(dec{l.val, x}, dec{l.val + 1, x}, true)
	}
	// numInt: D, D.x…, or D followed by j more digits.
	if full {
		return check(dec{l.val, 0}, dec{l.val, 0}, false)
	}
	if check(dec{l.val, 0}, dec{l.val + 1, 0}, true) {
		return true
	}
	m := l.val
	for j := 1; m <= (math.MaxInt64-9)/10; j++ {
		m *= 10
		if check(dec{l.val, j}, dec{l.val + 1, j}, true) {
			return true
		}
		if nb.hasHi && !l.neg && cmpDec(dec{l.val, j}, nb.hi) > 0 || nb.hasLo && l.neg && cmpDec(dec{-l.val, j}, nb.lo) < 0 {
			return false // longer numbers only move further out
		}
	}
	return false
}

// decDone reports whether the number read is within its bounds.
func (l *lexer) decDone() bool {
	v := dec{l.val, -int(l.frac)}
	if l.neg {
		v.m = -v.m
	}
	return l.num.nb.contains(v)
}
