package jinja

import (
	"math"
	"math/big"
	"strings"
)

// Python operator semantics for the template operators.

func opTypeError(op string, a, b Value) error {
	return typeErrorf("unsupported operand type(s) for %s: '%s' and '%s'", op, pyTypeName(a), pyTypeName(b))
}

func binaryOp(op string, a, b Value) (Value, error) {
	if a.kind == KindUndefined {
		return Value{}, undefinedError(a)
	}
	if b.kind == KindUndefined {
		return Value{}, undefinedError(b)
	}
	if a.isNumber() && b.isNumber() {
		return numOp(op, a, b)
	}
	switch op {
	case "+":
		switch {
		case a.kind == KindString && b.kind == KindString:
			return concatStrings(a, b)
		case a.kind == KindList && b.kind == KindList && seqKind(a) == seqKind(b) && seqKind(a) >= 0:
			la, lb := a.list().Items, b.list().Items
			if len(la)+len(lb) > maxListLen {
				return Value{}, errTooBig
			}
			items := make([]Value, 0, len(la)+len(lb))
			items = append(append(items, la...), lb...)
			if seqKind(a) == int(listTuple) {
				return NewTuple(items), nil
			}
			return NewList(items), nil
		case a.kind == KindString:
			return Value{}, typeErrorf("can only concatenate str (not \"%s\") to str", pyTypeName(b))
		case a.kind == KindList && (seqKind(a) == int(listPlain) || seqKind(a) == int(listTuple)):
			return Value{}, typeErrorf("can only concatenate %s (not \"%s\") to %s", pyTypeName(a), pyTypeName(b), pyTypeName(a))
		}
	case "*":
		if a.isIntLike() && (b.kind == KindString || b.kind == KindList) {
			a, b = b, a
		}
		if b.isIntLike() {
			n := int64(0)
			if b.isBig() {
				if b.bigInt().Sign() > 0 {
					n = math.MaxInt64
				}
			} else {
				n = b.n
			}
			if n < 0 {
				n = 0
			}
			switch {
			case a.kind == KindString:
				if n > 0 && int64(len(a.s)) > int64(maxStringLen)/n {
					return Value{}, errTooBig
				}
				return Value{kind: KindString, s: strings.Repeat(a.s, int(n)), flag: a.flag}, nil
			case a.kind == KindList && seqKind(a) >= 0:
				items := a.list().Items
				if n > 0 && int64(len(items)) > int64(maxListLen)/n {
					return Value{}, errTooBig
				}
				out := make([]Value, 0, len(items)*int(n))
				for i := int64(0); i < n; i++ {
					out = append(out, items...)
				}
				if seqKind(a) == int(listTuple) {
					return NewTuple(out), nil
				}
				return NewList(out), nil
			}
		}
		if a.kind == KindString || b.kind == KindString || a.kind == KindList || b.kind == KindList {
			if (a.kind == KindString || a.kind == KindList) && !b.isIntLike() {
				return Value{}, typeErrorf("can't multiply sequence by non-int of type '%s'", pyTypeName(b))
			}
		}
	case "%":
		if a.kind == KindString {
			return percentFormat(a, b)
		}
	}
	sym := op
	if op == "**" {
		sym = "** or pow()"
	}
	return Value{}, opTypeError(sym, a, b)
}

const maxListLen = 1 << 20

// seqKind is the concatenable kind of a list value (list or tuple), -1 for
// generators and views.
func seqKind(v Value) int {
	switch v.list().kind {
	case listPlain:
		return int(listPlain)
	case listTuple:
		return int(listTuple)
	}
	return -1
}

// concatStrings is str + str, with markupsafe's rule that adding a plain
// string to Markup escapes the plain one.
func concatStrings(a, b Value) (Value, error) {
	if len(a.s)+len(b.s) > maxStringLen {
		return Value{}, errTooBig
	}
	switch {
	case a.isSafe() && !b.isSafe():
		return Markup(a.s + htmlEscape(b.s)), nil
	case !a.isSafe() && b.isSafe():
		return Markup(htmlEscape(a.s) + b.s), nil
	case a.isSafe():
		return Markup(a.s + b.s), nil
	}
	return String(a.s + b.s), nil
}

// htmlEscape is markupsafe.escape's replacement table.
func htmlEscape(s string) string {
	if !strings.ContainsAny(s, "&<>'\"") {
		return s
	}
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "'", "&#39;", "\"", "&#34;")
	return r.Replace(s)
}

func unaryOp(v Value, neg bool) (Value, error) {
	switch v.kind {
	case KindUndefined:
		return Value{}, undefinedError(v)
	case KindBool, KindInt:
		if !neg {
			if v.kind == KindBool {
				return Int(v.n), nil
			}
			return v, nil
		}
		if v.isBig() || v.n == math.MinInt64 {
			return BigInt(new(big.Int).Neg(v.toBig())), nil
		}
		return Int(-v.n), nil
	case KindFloat:
		if neg {
			return Float(-v.f), nil
		}
		return v, nil
	}
	sym := "+"
	if neg {
		sym = "-"
	}
	return Value{}, typeErrorf("bad operand type for unary %s: '%s'", sym, pyTypeName(v))
}

// toFloat converts a number to float64, failing for ints too large.
func toFloat(v Value) (float64, error) {
	switch v.kind {
	case KindFloat:
		return v.f, nil
	case KindBool, KindInt:
		if v.isBig() {
			f, _ := new(big.Float).SetInt(v.bigInt()).Float64()
			if math.IsInf(f, 0) {
				return 0, rtErrorf("OverflowError", "int too large to convert to float")
			}
			return f, nil
		}
		return float64(v.n), nil
	}
	return 0, typeErrorf("must be real number, not %s", pyTypeName(v))
}

func numOp(op string, a, b Value) (Value, error) {
	if a.kind != KindFloat && b.kind != KindFloat {
		return intOp(op, a, b)
	}
	x, err := toFloat(a)
	if err != nil {
		return Value{}, err
	}
	y, err := toFloat(b)
	if err != nil {
		return Value{}, err
	}
	switch op {
	case "+":
		return Float(x + y), nil
	case "-":
		return Float(x - y), nil
	case "*":
		return Float(x * y), nil
	case "/":
		if y == 0 {
			return Value{}, rtErrorf("ZeroDivisionError", "float division by zero")
		}
		return Float(x / y), nil
	case "//":
		if y == 0 {
			return Value{}, rtErrorf("ZeroDivisionError", "float floor division by zero")
		}
		d, _ := floatDivmod(x, y)
		return Float(d), nil
	case "%":
		if y == 0 {
			return Value{}, rtErrorf("ZeroDivisionError", "float modulo")
		}
		_, m := floatDivmod(x, y)
		return Float(m), nil
	case "**":
		if x == 0 && y < 0 {
			return Value{}, rtErrorf("ZeroDivisionError", "0.0 cannot be raised to a negative power")
		}
		if x < 0 && y != math.Trunc(y) && !math.IsInf(y, 0) {
			return Value{}, typeErrorf("complex results are not supported")
		}
		r := math.Pow(x, y)
		if math.IsInf(r, 0) && !math.IsInf(x, 0) && !math.IsInf(y, 0) {
			return Value{}, rtErrorf("OverflowError", "(34, 'Numerical result out of range')")
		}
		return Float(r), nil
	}
	return Value{}, opTypeError(op, a, b)
}

// floatDivmod is CPython's float_divmod.
func floatDivmod(vx, wx float64) (float64, float64) {
	mod := math.Mod(vx, wx)
	div := (vx - mod) / wx
	if mod != 0 {
		if (wx < 0) != (mod < 0) {
			mod += wx
			div -= 1
		}
	} else {
		mod = math.Copysign(0, wx)
	}
	var floordiv float64
	if div != 0 {
		floordiv = math.Floor(div)
		if div-floordiv > 0.5 {
			floordiv++
		}
	} else {
		floordiv = math.Copysign(0, vx/wx)
	}
	return floordiv, mod
}

func intOp(op string, a, b Value) (Value, error) {
	small := !a.isBig() && !b.isBig()
	x, y := a.n, b.n
	switch op {
	case "+":
		if small {
			s := x + y
			if (x^s)&(y^s) >= 0 {
				return Int(s), nil
			}
		}
		return BigInt(new(big.Int).Add(a.toBig(), b.toBig())), nil
	case "-":
		if small {
			s := x - y
			if (x^y)&(x^s) >= 0 {
				return Int(s), nil
			}
		}
		return BigInt(new(big.Int).Sub(a.toBig(), b.toBig())), nil
	case "*":
		if small && absLess(x, 1<<31) && absLess(y, 1<<31) {
			return Int(x * y), nil
		}
		r := new(big.Int).Mul(a.toBig(), b.toBig())
		if r.BitLen() > maxIntBits {
			return Value{}, errTooBig
		}
		return BigInt(r), nil
	case "/":
		if isZero(b) {
			return Value{}, rtErrorf("ZeroDivisionError", "division by zero")
		}
		if small && absLess(x, 1<<53) && absLess(y, 1<<53) {
			return Float(float64(x) / float64(y)), nil
		}
		f, _ := new(big.Rat).SetFrac(a.toBig(), b.toBig()).Float64()
		if math.IsInf(f, 0) {
			return Value{}, rtErrorf("OverflowError", "integer division result too large for a float")
		}
		return Float(f), nil
	case "//", "%":
		if isZero(b) {
			if op == "//" {
				return Value{}, rtErrorf("ZeroDivisionError", "integer division or modulo by zero")
			}
			return Value{}, rtErrorf("ZeroDivisionError", "integer modulo by zero")
		}
		if small && y != -1 {
			q, r := x/y, x%y
			if r != 0 && (r < 0) != (y < 0) {
				q--
				r += y
			}
			if op == "//" {
				return Int(q), nil
			}
			return Int(r), nil
		}
		q, m := new(big.Int), new(big.Int)
		q.DivMod(a.toBig(), b.toBig(), m) // Euclidean: m >= 0
		if m.Sign() != 0 && b.toBig().Sign() < 0 {
			q.Add(q, big.NewInt(1))
			m.Add(m, b.toBig())
		}
		if op == "//" {
			return BigInt(q), nil
		}
		return BigInt(m), nil
	case "**":
		if b.isBig() || y < 0 {
			if b.isBig() && b.bigInt().Sign() > 0 {
				if a.isBig() || x > 1 || x < -1 {
					return Value{}, errTooBig
				}
			} else {
				fx, err := toFloat(a)
				if err != nil {
					return Value{}, err
				}
				fy, err := toFloat(b)
				if err != nil {
					return Value{}, err
				}
				if fx == 0 {
					return Value{}, rtErrorf("ZeroDivisionError", "0.0 cannot be raised to a negative power")
				}
				return Float(math.Pow(fx, fy)), nil
			}
		}
		base := a.toBig()
		if int64(base.BitLen())*y > maxIntBits {
			return Value{}, errTooBig
		}
		return BigInt(new(big.Int).Exp(base, b.toBig(), nil)), nil
	}
	return Value{}, opTypeError(op, a, b)
}

// maxIntBits bounds integer results (Python would grow them without limit).
const maxIntBits = 1 << 16

func absLess(x, lim int64) bool { return x < lim && x > -lim }

func isZero(v Value) bool { return !v.isBig() && v.n == 0 }

// compareOp evaluates one comparison operator.
func compareOp(op string, a, b Value) (bool, error) {
	switch op {
	case "==":
		return boundedEqual(a, b)
	case "!=":
		eq, err := boundedEqual(a, b)
		return !eq, err
	case "in":
		return pyContains(b, a)
	case "notin":
		ok, err := pyContains(b, a)
		return !ok, err
	case "<":
		return pyLess(a, b)
	case ">":
		return pyLessOp(b, a, ">", a, b)
	case "<=":
		lt, err := pyLessOp(a, b, "<=", a, b)
		if err != nil || lt {
			return lt, err
		}
		return boundedEqual(a, b)
	case ">=":
		lt, err := pyLessOp(b, a, ">=", a, b)
		if err != nil || lt {
			return lt, err
		}
		return boundedEqual(a, b)
	}
	return false, typeErrorf("unknown operator %s", op)
}

func pyLess(a, b Value) (bool, error) { return pyLessOp(a, b, "<", a, b) }

// pyLessOp is a < b; op, oa, ob name the original comparison for errors.
func pyLessOp(a, b Value, op string, oa, ob Value) (bool, error) {
	work := 0
	return lessWithin(a, b, op, oa, ob, &work)
}

// lessWithin is pyLessOp counting the container items it visits in *work
// (see equalWithin).
func lessWithin(a, b Value, op string, oa, ob Value, work *int) (bool, error) {
	if a.kind == KindUndefined {
		return false, undefinedError(a)
	}
	if b.kind == KindUndefined {
		return false, undefinedError(b)
	}
	if a.isNumber() && b.isNumber() {
		return numCompare(a, b) < 0 && !isNaNValue(a) && !isNaNValue(b), nil
	}
	if a.kind == KindString && b.kind == KindString {
		return a.s < b.s, nil
	}
	if a.kind == KindList && b.kind == KindList && seqKind(a) >= 0 && seqKind(a) == seqKind(b) {
		x, y := a.list().Items, b.list().Items
		for i := 0; i < len(x) && i < len(y); i++ {
			eq, err := equalWithin(x[i], y[i], work)
			if err != nil {
				return false, err
			}
			if !eq {
				return lessWithin(x[i], y[i], op, oa, ob, work)
			}
		}
		return len(x) < len(y), nil
	}
	return false, typeErrorf("'%s' not supported between instances of '%s' and '%s'", op, pyTypeName(oa), pyTypeName(ob))
}

func isNaNValue(v Value) bool { return v.kind == KindFloat && math.IsNaN(v.f) }

// numCompare orders two numbers exactly (ints of any size against floats).
func numCompare(a, b Value) int {
	if a.kind != KindFloat && b.kind != KindFloat {
		if !a.isBig() && !b.isBig() {
			switch {
			case a.n < b.n:
				return -1
			case a.n > b.n:
				return 1
			}
			return 0
		}
		return a.toBig().Cmp(b.toBig())
	}
	if a.kind == KindFloat && b.kind == KindFloat {
		switch {
		case a.f < b.f:
			return -1
		case a.f > b.f:
			return 1
		}
		return 0
	}
	// Mixed int/float.
	if isNaNValue(a) || isNaNValue(b) {
		return 2
	}
	af, bf := bigFloatOf(a), bigFloatOf(b)
	if af == nil || bf == nil {
		// An infinity against an int.
		fa, fb := a.f, b.f
		if a.kind != KindFloat {
			fa = 0
		}
		if b.kind != KindFloat {
			fb = 0
		}
		switch {
		case fa < fb:
			return -1
		case fa > fb:
			return 1
		}
		return 0
	}
	return af.Cmp(bf)
}

func bigFloatOf(v Value) *big.Float {
	if v.kind == KindFloat {
		if math.IsInf(v.f, 0) {
			return nil
		}
		return new(big.Float).SetFloat64(v.f)
	}
	return new(big.Float).SetInt(v.toBig())
}

// maxCompareWork bounds the container items one bounded comparison may
// visit: values that share sub-lists can be exponentially larger than the
// steps that built them.
const maxCompareWork = 1 << 22

var errCompareTooBig = &RuntimeError{Type: "LimitError", Msg: "comparison too large"}

// boundedEqual is pyEqual that fails with a LimitError past maxCompareWork.
func boundedEqual(a, b Value) (bool, error) {
	work := 0
	return equalWithin(a, b, &work)
}

// pyEqual is Python ==.
func pyEqual(a, b Value) bool {
	eq, _ := equalWithin(a, b, nil)
	return eq
}

// equalWithin is Python ==, counting each container item it visits in *work
// and failing once that exceeds maxCompareWork; work nil means no bound.
func equalWithin(a, b Value, work *int) (bool, error) {
	if a.isNumber() && b.isNumber() {
		if isNaNValue(a) || isNaNValue(b) {
			return false, nil
		}
		return numCompare(a, b) == 0, nil
	}
	if a.kind != b.kind {
		return false, nil
	}
	switch a.kind {
	case KindUndefined, KindNone:
		return true, nil
	case KindString:
		return a.s == b.s, nil
	case KindList:
		la, lb := a.list(), b.list()
		if la == lb {
			return true, nil
		}
		if seqKind(a) < 0 || seqKind(a) != seqKind(b) {
			return false, nil
		}
		if len(la.Items) != len(lb.Items) {
			return false, nil
		}
		for i := range la.Items {
			if err := countWork(work); err != nil {
				return false, err
			}
			if eq, err := equalWithin(la.Items[i], lb.Items[i], work); err != nil || !eq {
				return false, err
			}
		}
		return true, nil
	case KindDict:
		da, db := a.dict(), b.dict()
		if da == db {
			return true, nil
		}
		if da.Len() != db.Len() {
			return false, nil
		}
		for i, k := range da.keys {
			if err := countWork(work); err != nil {
				return false, err
			}
			v, ok, err := db.Get(k)
			if err != nil || !ok {
				return false, nil
			}
			if eq, err := equalWithin(da.vals[i], v, work); err != nil || !eq {
				return false, err
			}
		}
		return true, nil
	}
	return a.ref == b.ref, nil
}

// countWork counts one item against a comparison's budget (nil: none).
func countWork(work *int) error {
	if work == nil {
		return nil
	}
	if *work++; *work > maxCompareWork {
		return errCompareTooBig
	}
	return nil
}

// pyContains is Python's `item in container`.
func pyContains(container, item Value) (bool, error) {
	switch container.kind {
	case KindUndefined:
		return false, nil
	case KindString:
		if item.kind != KindString {
			if item.kind == KindUndefined {
				return false, undefinedError(item)
			}
			return false, typeErrorf("'in <string>' requires string as left operand, not %s", pyTypeName(item))
		}
		return strings.Contains(container.s, item.s), nil
	case KindList:
		for _, it := range container.list().Items {
			if pyEqual(it, item) {
				return true, nil
			}
		}
		return false, nil
	case KindDict:
		if err := checkHashable(item); err != nil {
			return false, err
		}
		_, ok, err := container.dict().Get(item)
		return ok, err
	case KindNamespace:
		return false, typeErrorf("argument of type 'Namespace' is not iterable")
	}
	return false, typeErrorf("argument of type '%s' is not iterable", pyTypeName(container))
}
