package jinja

// Number filters (int, float, abs, round); the registry is in filters.go.

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
)

func fAbs(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	if _, err := bindArgs("abs", args, kw, nil, nil, 0); err != nil {
		return Value{}, err
	}
	switch v.kind {
	case KindFloat:
		return Float(math.Abs(v.f)), nil
	case KindInt, KindBool:
		if v.isBig() {
			return BigInt(new(big.Int).Abs(v.bigInt())), nil
		}
		if v.n < 0 {
			return unaryOp(v, true)
		}
		return Int(v.n), nil
	}
	return Value{}, typeErrorf("bad operand type for abs(): '%s'", pyTypeName(v))
}

// pyIntOf is the int filter's conversion: int(value) (strings in base),
// then int(float(value)), else the default.
func pyIntOf(v Value, base int, def Value) (Value, error) {
	switch v.kind {
	case KindUndefined:
		return Value{}, undefinedError(v)
	case KindBool, KindInt:
		return Int(v.n).withBig(v), nil
	case KindFloat:
		if math.IsInf(v.f, 0) {
			return Value{}, rtErrorf("OverflowError", "cannot convert float infinity to integer")
		}
		if math.IsNaN(v.f) {
			return def, nil
		}
		return floatToInt(v.f), nil
	case KindString:
		if i, ok := parsePyInt(v.s, base); ok {
			return i, nil
		}
		if f, ok := parsePyFloat(v.s); ok && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return floatToInt(f), nil
		}
		return def, nil
	}
	return def, nil
}

func (v Value) withBig(orig Value) Value {
	if orig.isBig() {
		return orig
	}
	return v
}

func floatToInt(f float64) Value {
	t := math.Trunc(f)
	if math.Abs(t) < 1<<62 {
		return Int(int64(t))
	}
	b, _ := new(big.Float).SetFloat64(t).Int(nil)
	return BigInt(b)
}

// parsePyInt is int(s, base) for base 10 (and 0/2/8/16): surrounding
// whitespace, a sign and single underscores between digits are allowed.
func parsePyInt(s string, base int) (Value, bool) {
	if base != 0 && (base < 2 || base > 36) {
		return Value{}, false
	}
	s = strings.TrimFunc(s, pyIsSpace)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if base == 0 || base == 16 || base == 8 || base == 2 {
		if len(s) > 2 && s[0] == '0' {
			p := map[byte]int{'x': 16, 'X': 16, 'o': 8, 'O': 8, 'b': 2, 'B': 2}[s[1]]
			if p != 0 && (base == 0 || base == p) {
				base = p
				s = s[2:]
				if s != "" && s[0] == '_' {
					s = s[1:]
				}
			}
		}
		if base == 0 {
			base = 10
		}
	}
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") {
		return Value{}, false
	}
	clean := strings.ReplaceAll(s, "_", "")
	for _, r := range clean {
		if r > unicode.MaxASCII {
			return Value{}, false
		}
	}
	b, ok := new(big.Int).SetString(clean, base)
	if !ok {
		return Value{}, false
	}
	if neg {
		b.Neg(b)
	}
	return BigInt(b), true
}

// parsePyFloat is float(s) for a string.
func parsePyFloat(s string) (float64, bool) {
	s = strings.TrimFunc(s, pyIsSpace)
	low := strings.ToLower(s)
	switch strings.TrimLeft(low, "+-") {
	case "inf", "infinity":
		if strings.HasPrefix(low, "-") {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	case "nan":
		return math.NaN(), true
	}
	if s == "" || strings.Contains(s, "__") || strings.HasPrefix(s, "_") || strings.HasSuffix(s, "_") {
		return 0, false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' || c == '_') {
			return 0, false
		}
	}
	if strings.Contains(low, "0x") {
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return f, true
		}
		return 0, false
	}
	return f, true
}

func fInt(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	a, err := bindArgs("do_int", args, kw, []string{"default", "base"}, []Value{Int(0), Int(10)}, 0)
	if err != nil {
		return Value{}, err
	}
	base, _ := a[1].Int64()
	return pyIntOf(v, int(base), a[0])
}

func fFloat(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	a, err := bindArgs("do_float", args, kw, []string{"default"}, []Value{Float(0)}, 0)
	if err != nil {
		return Value{}, err
	}
	switch v.kind {
	case KindUndefined:
		return Value{}, undefinedError(v)
	case KindFloat:
		return v, nil
	case KindInt, KindBool:
		f, err := toFloat(v)
		return Float(f), err
	case KindString:
		if f, ok := parsePyFloat(v.s); ok {
			return Float(f), nil
		}
	}
	return a[0], nil
}

func fRound(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	a, err := bindArgs("do_round", args, kw, []string{"precision", "method"}, []Value{Int(0), String("common")}, 0)
	if err != nil {
		return Value{}, err
	}
	method := a[1].s
	if a[1].kind != KindString || (method != "common" && method != "ceil" && method != "floor") {
		return Value{}, rtErrorf("FilterArgumentError", "method must be common, ceil or floor")
	}
	prec, ok := a[0].Int64()
	if !ok {
		return Value{}, typeErrorf("'%s' object cannot be interpreted as an integer", pyTypeName(a[0]))
	}
	if v.kind == KindUndefined {
		return Value{}, typeErrorf("type Undefined doesn't define __round__ method")
	}
	if !v.isNumber() {
		return Value{}, typeErrorf("type %s doesn't define __round__ method", pyTypeName(v))
	}
	if method == "common" {
		if v.kind != KindFloat {
			if prec >= 0 {
				return Int(v.n).withBig(v), nil
			}
			// round(int, -k): round half to even on multiples of 10^k.
			p := new(big.Int).Exp(big.NewInt(10), big.NewInt(-prec), nil)
			q, m := new(big.Int).DivMod(v.toBig(), p, new(big.Int))
			twice := new(big.Int).Mul(m, big.NewInt(2))
			if c := twice.Cmp(p); c > 0 || (c == 0 && q.Bit(0) == 1) {
				q.Add(q, big.NewInt(1))
			}
			return BigInt(q.Mul(q, p)), nil
		}
		return Float(pyRoundFloat(v.f, int(prec))), nil
	}
	f, err := toFloat(v)
	if err != nil {
		return Value{}, err
	}
	scale := math.Pow(10, float64(prec))
	if method == "ceil" {
		return Float(math.Ceil(f*scale) / scale), nil
	}
	return Float(math.Floor(f*scale) / scale), nil
}

// pyRoundFloat is round(x, ndigits) for floats: the decimal string of x
// correctly rounded (half to even on the exact binary value).
func pyRoundFloat(x float64, nd int) float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) || x == 0 {
		return x
	}
	if nd > 22+308 {
		return x
	}
	if nd >= 0 {
		s := strconv.FormatFloat(x, 'f', nd, 64)
		r, _ := strconv.ParseFloat(s, 64)
		return r
	}
	// Negative ndigits: exact arithmetic on the binary value.
	p := new(big.Float).SetPrec(2000).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-nd)), nil))
	bx := new(big.Float).SetPrec(2000).SetFloat64(x)
	q := new(big.Float).SetPrec(2000).Quo(bx, p)
	qi, _ := q.Int(nil) // truncated toward zero
	rem := new(big.Float).SetPrec(2000).Sub(q, new(big.Float).SetPrec(2000).SetInt(qi))
	half := big.NewFloat(0.5)
	ar := new(big.Float).Abs(rem)
	c := ar.Cmp(half)
	if c > 0 || (c == 0 && qi.Bit(0) == 1) {
		if x > 0 {
			qi.Add(qi, big.NewInt(1))
		} else {
			qi.Sub(qi, big.NewInt(1))
		}
	}
	res := new(big.Float).SetPrec(2000).SetInt(qi)
	res.Mul(res, p)
	f, _ := res.Float64()
	if f == 0 {
		return math.Copysign(0, x)
	}
	return f
}
