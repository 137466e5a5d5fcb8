package jinja

import (
	"math/big"
)

// Kind is the Python type family of a Value.
type Kind uint8

// The kinds a Value can have. Tuples, generators and dict views are lists
// with a sub-kind (see Value.IsTuple); Markup strings are strings with the
// safe flag.
const (
	KindUndefined Kind = iota
	KindNone
	KindBool
	KindInt
	KindFloat
	KindString
	KindList
	KindDict
	KindNamespace
	KindCallable
	KindLoop
)

// listKind distinguishes the Python sequence types that share the list
// representation: they print, compare and answer len() differently.
type listKind uint8

const (
	listPlain listKind = iota
	listTuple
	listGen     // a generator: truthy, no len(), consumed by iteration
	listItems   // dict_items view
	listKeys    // dict_keys view
	listValues  // dict_values view
	listRevIter // list_reverseiterator
)

const flagSafe uint8 = 1 // string is markupsafe.Markup

// Value is a template value with Python semantics. The zero Value is
// undefined. Values are immutable from templates' point of view (the
// immutable sandbox forbids list/dict mutation); only Namespace attributes
// change, through {% set ns.attr = ... %}.
type Value struct {
	kind Kind
	flag uint8
	n    int64 // int value (when ref is nil) or bool (0/1)
	f    float64
	s    string
	ref  any // *big.Int, *List, *Dict, *Namespace, *Callable, *undefInfo, *loopState
}

// List is the storage of list-like values. Items must not be modified once
// the list is shared with a template.
type List struct {
	Items    []Value
	kind     listKind
	consumed bool // generator already iterated
	genName  string
	fields   []string // attribute names of a named tuple (groupby results)
}

// Namespace is the mutable object created by namespace().
type Namespace struct {
	attrs *Dict
}

// undefInfo records how an undefined value came to be, for the error
// message raised when a template uses it.
type undefInfo struct {
	hint    string
	objType string // object_type_repr of the container; "" when missing
	name    Value  // attribute (string) or element key
	hasName bool
	excType string // "UndefinedError" or "SecurityError"
}

// Undefined returns a plain undefined value.
func Undefined() Value { return Value{} }

func undefinedNamed(name string) Value {
	return Value{ref: &undefInfo{name: String(name), hasName: true}}
}

func undefinedHint(hint string) Value {
	return Value{ref: &undefInfo{hint: hint}}
}

func undefinedAttr(obj Value, name Value) Value {
	return Value{ref: &undefInfo{objType: objectTypeRepr(obj), name: name, hasName: true}}
}

// None returns Python None.
func None() Value { return Value{kind: KindNone} }

// Bool returns a Python bool.
func Bool(b bool) Value {
	if b {
		return Value{kind: KindBool, n: 1}
	}
	return Value{kind: KindBool}
}

// Int returns a Python int.
func Int(i int64) Value { return Value{kind: KindInt, n: i} }

// BigInt returns a Python int of any size.
func BigInt(b *big.Int) Value {
	if b.IsInt64() {
		return Int(b.Int64())
	}
	return Value{kind: KindInt, ref: new(big.Int).Set(b)}
}

// Float returns a Python float.
func Float(f float64) Value { return Value{kind: KindFloat, f: f} }

// String returns a Python str.
func String(s string) Value { return Value{kind: KindString, s: s} }

// Markup returns a markupsafe.Markup string (what the safe filter makes).
func Markup(s string) Value { return Value{kind: KindString, s: s, flag: flagSafe} }

// NewList returns a Python list holding items (not copied).
func NewList(items []Value) Value {
	return Value{kind: KindList, ref: &List{Items: items}}
}

// NewTuple returns a Python tuple holding items (not copied).
func NewTuple(items []Value) Value {
	return Value{kind: KindList, ref: &List{Items: items, kind: listTuple}}
}

func newGen(items []Value, name string) Value {
	return Value{kind: KindList, ref: &List{Items: items, kind: listGen, genName: name}}
}

func newView(items []Value, k listKind) Value {
	return Value{kind: KindList, ref: &List{Items: items, kind: k}}
}

// DictValue wraps d as a Python dict value.
func DictValue(d *Dict) Value { return Value{kind: KindDict, ref: d} }

// Kind reports the value's kind.
func (v Value) Kind() Kind { return v.kind }

// IsUndefined reports whether v is undefined.
func (v Value) IsUndefined() bool { return v.kind == KindUndefined }

// IsTuple reports whether v is a tuple.
func (v Value) IsTuple() bool { return v.kind == KindList && v.list().kind == listTuple }

// Str returns the string of a str value ("" otherwise).
func (v Value) Str() string { return v.s }

// Int64 returns the value of an int or bool that fits in int64.
func (v Value) Int64() (int64, bool) {
	switch v.kind {
	case KindBool:
		return v.n, true
	case KindInt:
		if v.ref == nil {
			return v.n, true
		}
	}
	return 0, false
}

// Float64 returns the float of a float value.
func (v Value) Float64() float64 { return v.f }

// BoolValue returns the bool of a bool value.
func (v Value) BoolValue() bool { return v.kind == KindBool && v.n != 0 }

// Items returns the elements of a list-like value (shared, do not modify).
func (v Value) Items() []Value {
	if v.kind != KindList {
		return nil
	}
	return v.list().Items
}

// Dict returns the dict of a dict value, or nil.
func (v Value) Dict() *Dict {
	if v.kind != KindDict {
		return nil
	}
	return v.ref.(*Dict)
}

func (v Value) list() *List         { return v.ref.(*List) }
func (v Value) dict() *Dict         { return v.ref.(*Dict) }
func (v Value) ns() *Namespace      { return v.ref.(*Namespace) }
func (v Value) callable() *Callable { return v.ref.(*Callable) }
func (v Value) loop() *loopState    { return v.ref.(*loopState) }
func (v Value) isSafe() bool        { return v.kind == KindString && v.flag&flagSafe != 0 }
func (v Value) isBig() bool         { return v.kind == KindInt && v.ref != nil }
func (v Value) bigInt() *big.Int    { return v.ref.(*big.Int) }
func (v Value) isNumber() bool      { return v.kind == KindInt || v.kind == KindFloat || v.kind == KindBool }
func (v Value) isIntLike() bool     { return v.kind == KindInt || v.kind == KindBool }
func (v Value) undef() *undefInfo {
	if u, ok := v.ref.(*undefInfo); ok {
		return u
	}
	return nil
}

// toBig returns an int/bool value as a big.Int (a fresh one).
func (v Value) toBig() *big.Int {
	if v.isBig() {
		return new(big.Int).Set(v.bigInt())
	}
	return big.NewInt(v.n)
}

// Truth is Python's bool(v).
func (v Value) Truth() bool {
	switch v.kind {
	case KindUndefined, KindNone:
		return false
	case KindBool:
		return v.n != 0
	case KindInt:
		if v.ref != nil {
			return true // big ints are never zero (normalized)
		}
		return v.n != 0
	case KindFloat:
		return v.f != 0
	case KindString:
		return v.s != ""
	case KindList:
		l := v.list()
		if l.kind == listGen || l.kind == listRevIter {
			return true
		}
		return len(l.Items) > 0
	case KindDict:
		return v.dict().Len() > 0
	}
	return true
}

// pyTypeName is type(v).__name__ as Python reports it in error messages.
func pyTypeName(v Value) string {
	switch v.kind {
	case KindUndefined:
		return "Undefined"
	case KindNone:
		return "NoneType"
	case KindBool:
		return "bool"
	case KindInt:
		return "int"
	case KindFloat:
		return "float"
	case KindString:
		if v.isSafe() {
			return "Markup"
		}
		return "str"
	case KindList:
		switch v.list().kind {
		case listTuple:
			return "tuple"
		case listGen:
			return "generator"
		case listItems:
			return "dict_items"
		case listKeys:
			return "dict_keys"
		case listValues:
			return "dict_values"
		case listRevIter:
			return "list_reverseiterator"
		}
		return "list"
	case KindDict:
		return "dict"
	case KindNamespace:
		return "Namespace"
	case KindCallable:
		c := v.callable()
		if c.macro != nil {
			return "Macro"
		}
		if c.self != nil {
			return "builtin_function_or_method"
		}
		return "function"
	case KindLoop:
		return "LoopContext"
	}
	return "object"
}

// objectTypeRepr mirrors jinja2.utils.object_type_repr, used in undefined
// messages ("'dict object' has no attribute 'x'").
func objectTypeRepr(v Value) string {
	switch v.kind {
	case KindNone:
		return "None"
	case KindString:
		if v.isSafe() {
			return "markupsafe.Markup object"
		}
	case KindNamespace:
		return "jinja2.utils.Namespace object"
	case KindLoop:
		return "jinja2.runtime.LoopContext object"
	case KindUndefined:
		return "jinja2.runtime.Undefined object"
	case KindCallable:
		if v.callable().macro != nil {
			return "jinja2.runtime.Macro object"
		}
	}
	return pyTypeName(v) + " object"
}
