package jinja

// Sequence filters; the registry is in filters.go.

import (
	"sort"
	"strconv"
	"strings"
)

// pyLenOf is Python's len() for the values that have one.
func pyLenOf(v Value) (int, error) {
	switch v.kind {
	case KindUndefined:
		return 0, nil
	case KindString:
		return pyLen(v.s), nil
	case KindList:
		l := v.list()
		if l.kind == listGen || l.kind == listRevIter {
			break
		}
		return len(l.Items), nil
	case KindDict:
		return v.dict().Len(), nil
	case KindLoop:
		return v.loop().length()
	}
	return 0, typeErrorf("object of type '%s' has no len()", pyTypeName(v))
}

func fLength(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	if _, err := bindArgs("len", args, kw, nil, nil, 0); err != nil {
		return Value{}, err
	}
	n, err := pyLenOf(v)
	return Int(int64(n)), err
}

func fList(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	if _, err := bindArgs("list", args, kw, nil, nil, 0); err != nil {
		return Value{}, err
	}
	items, err := ev.iterate(v)
	if err != nil {
		return Value{}, err
	}
	return NewList(append([]Value(nil), items...)), nil
}

func fItems(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	if _, err := bindArgs("do_items", args, kw, nil, nil, 0); err != nil {
		return Value{}, err
	}
	if v.kind == KindUndefined {
		return newGen(nil, "do_items"), nil
	}
	if v.kind != KindDict {
		return Value{}, typeErrorf("Can only get item pairs from a mapping.")
	}
	return newGen(dictItems(v.dict()), "do_items"), nil
}

func fFirst(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	if _, err := bindArgs("do_first", args, kw, nil, nil, 0); err != nil {
		return Value{}, err
	}
	items, err := ev.iterate(v)
	if err != nil {
		return Value{}, err
	}
	if len(items) == 0 {
		return undefinedHint("No first item, sequence was empty."), nil
	}
	return items[0], nil
}

func fLast(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	if _, err := bindArgs("do_last", args, kw, nil, nil, 0); err != nil {
		return Value{}, err
	}
	if v.kind == KindList && (v.list().kind == listGen || v.list().kind == listRevIter) {
		return Value{}, typeErrorf("'%s' object is not reversible", pyTypeName(v))
	}
	items, err := ev.iterate(v)
	if err != nil {
		return Value{}, err
	}
	if len(items) == 0 {
		return undefinedHint("No last item, sequence was empty."), nil
	}
	return items[len(items)-1], nil
}

func fJoin(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	a, err := bindArgs("do_join", args, kw, []string{"d", "attribute"}, []Value{String(""), None()}, 0)
	if err != nil {
		return Value{}, err
	}
	items, err := ev.iterate(v)
	if err != nil {
		return Value{}, err
	}
	sep, err := pyStrErr(a[0])
	if err != nil {
		return Value{}, err
	}
	var sb strings.Builder
	for i, it := range items {
		if a[1].kind != KindNone {
			if it, err = ev.attrGet(it, a[1], nil); err != nil {
				return Value{}, err
			}
		}
		if i > 0 {
			sb.WriteString(sep)
		}
		if err := writeStr(&sb, it, 0); err != nil {
			return Value{}, err
		}
	}
	return String(sb.String()), nil
}

func fReverse(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	if _, err := bindArgs("do_reverse", args, kw, nil, nil, 0); err != nil {
		return Value{}, err
	}
	switch v.kind {
	case KindString:
		r := []rune(v.s)
		reverse(r)
		return Value{kind: KindString, s: string(r), flag: v.flag}, nil
	case KindUndefined:
		return newView(nil, listRevIter), nil
	case KindList:
		l := v.list()
		if l.kind == listGen || l.kind == listRevIter {
			items, _ := ev.iterate(v)
			out := append([]Value(nil), items...)
			reverse(out)
			return NewList(out), nil
		}
		out := append([]Value(nil), l.Items...)
		reverse(out)
		return newView(out, listRevIter), nil
	case KindDict:
		out := append([]Value(nil), v.dict().keys...)
		reverse(out)
		return newView(out, listRevIter), nil
	}
	return Value{}, rtErrorf("FilterArgumentError", "argument must be iterable")
}

// attrGet follows a dotted attribute path like jinja's make_attrgetter:
// each part is looked up as an item (integers for all-digit parts).
func (ev *evaluator) attrGet(item Value, attr Value, def *Value) (Value, error) {
	var parts []Value
	if attr.kind == KindString {
		for _, p := range strings.Split(attr.s, ".") {
			if p != "" && strings.Trim(p, "0123456789") == "" {
				n, _ := strconv.ParseInt(p, 10, 64)
				parts = append(parts, Int(n))
			} else {
				parts = append(parts, String(p))
			}
		}
	} else if attr.kind != KindNone {
		parts = []Value{attr}
	}
	var err error
	for _, p := range parts {
		if item, err = ev.getitem(item, p); err != nil {
			return Value{}, err
		}
		if def != nil && def.kind != KindNone && item.kind == KindUndefined {
			item = *def
		}
	}
	return item, nil
}

func ignoreCase(v Value) Value {
	if v.kind == KindString {
		return String(pyLower(v.s))
	}
	return v
}

// sortValues sorts stably with Python ordering, reporting comparison errors.
func sortValues(items []Value, keys []Value, reverseOrder bool) error {
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	var serr error
	less := func(a, b int) bool {
		x, y := keys[idx[a]], keys[idx[b]]
		if reverseOrder {
			x, y = y, x
		}
		lt, err := pyLess(x, y)
		if err != nil && serr == nil {
			serr = err
		}
		return lt
	}
	sort.SliceStable(idx, less)
	if serr != nil {
		return serr
	}
	sorted := make([]Value, len(items))
	for i, j := range idx {
		sorted[i] = items[j]
	}
	copy(items, sorted)
	return nil
}

func fSort(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	a, err := bindArgs("do_sort", args, kw, []string{"reverse", "case_sensitive", "attribute"}, []Value{Bool(false), Bool(false), None()}, 0)
	if err != nil {
		return Value{}, err
	}
	src, err := ev.iterate(v)
	if err != nil {
		return Value{}, err
	}
	items := append([]Value(nil), src...)
	keys := make([]Value, len(items))
	for i, it := range items {
		var parts []Value
		var attrs []Value
		if a[2].kind == KindString {
			for _, p := range strings.Split(a[2].s, ",") {
				attrs = append(attrs, String(p))
			}
		} else {
			attrs = []Value{a[2]}
		}
		for _, at := range attrs {
			k, err := ev.attrGet(it, at, nil)
			if err != nil {
				return Value{}, err
			}
			if !a[1].Truth() {
				k = ignoreCase(k)
			}
			parts = append(parts, k)
		}
		keys[i] = NewList(parts)
	}
	if err := sortValues(items, keys, a[0].Truth()); err != nil {
		return Value{}, err
	}
	return NewList(items), nil
}

func fDictsort(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	a, err := bindArgs("do_dictsort", args, kw, []string{"case_sensitive", "by", "reverse"}, []Value{Bool(false), String("key"), Bool(false)}, 0)
	if err != nil {
		return Value{}, err
	}
	pos := 0
	switch {
	case a[1].kind == KindString && a[1].s == "key":
	case a[1].kind == KindString && a[1].s == "value":
		pos = 1
	default:
		return Value{}, rtErrorf("FilterArgumentError", "You can only sort by either \"key\" or \"value\"")
	}
	if v.kind == KindUndefined {
		return Value{}, undefinedError(v)
	}
	if v.kind != KindDict {
		return Value{}, rtErrorf("AttributeError", "'%s' object has no attribute 'items'", pyTypeName(v))
	}
	items := dictItems(v.dict())
	keys := make([]Value, len(items))
	for i, it := range items {
		k := it.list().Items[pos]
		if !a[0].Truth() {
			k = ignoreCase(k)
		}
		keys[i] = k
	}
	if err := sortValues(items, keys, a[2].Truth()); err != nil {
		return Value{}, err
	}
	return NewList(items), nil
}

func fUnique(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	a, err := bindArgs("do_unique", args, kw, []string{"case_sensitive", "attribute"}, []Value{Bool(false), None()}, 0)
	if err != nil {
		return Value{}, err
	}
	items, err := ev.iterate(v)
	if err != nil {
		return Value{}, err
	}
	seen := NewDict()
	var out []Value
	for _, it := range items {
		k, err := ev.attrGet(it, a[1], nil)
		if err != nil {
			return Value{}, err
		}
		if !a[0].Truth() {
			k = ignoreCase(k)
		}
		_, ok, err := seen.Get(k)
		if err != nil {
			return Value{}, err
		}
		if !ok {
			_ = seen.Set(k, None())
			out = append(out, it)
		}
	}
	return newGen(out, "sync_do_unique"), nil
}

func minMaxFilter(name string, sign int) filterFunc {
	return func(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
		a, err := bindArgs("do_"+name, args, kw, []string{"case_sensitive", "attribute"}, []Value{Bool(false), None()}, 0)
		if err != nil {
			return Value{}, err
		}
		items, err := ev.iterate(v)
		if err != nil {
			return Value{}, err
		}
		if len(items) == 0 {
			return undefinedHint("No aggregated item, sequence was empty."), nil
		}
		key := func(it Value) (Value, error) {
			k, err := ev.attrGet(it, a[1], nil)
			if err != nil {
				return Value{}, err
			}
			if !a[0].Truth() {
				k = ignoreCase(k)
			}
			return k, nil
		}
		best := items[0]
		bk, err := key(best)
		if err != nil {
			return Value{}, err
		}
		for _, it := range items[1:] {
			k, err := key(it)
			if err != nil {
				return Value{}, err
			}
			var better bool
			if sign > 0 {
				better, err = pyLess(bk, k)
			} else {
				better, err = pyLess(k, bk)
			}
			if err != nil {
				return Value{}, err
			}
			if better {
				best, bk = it, k
			}
		}
		return best, nil
	}
}

func fSum(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	a, err := bindArgs("do_sum", args, kw, []string{"attribute", "start"}, []Value{None(), Int(0)}, 0)
	if err != nil {
		return Value{}, err
	}
	items, err := ev.iterate(v)
	if err != nil {
		return Value{}, err
	}
	total := a[1]
	for _, it := range items {
		if a[0].kind != KindNone {
			if it, err = ev.attrGet(it, a[0], nil); err != nil {
				return Value{}, err
			}
		}
		if total, err = binaryOp("+", total, it); err != nil {
			return Value{}, err
		}
	}
	return total, nil
}

func fMap(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	if !v.Truth() {
		return newGen(nil, "sync_do_map"), nil
	}
	items, err := ev.iterate(v)
	if err != nil {
		return Value{}, err
	}
	var fn func(Value) (Value, error)
	if len(args) == 0 && len(kw) > 0 && hasKw(kw, "attribute") {
		var attr, def Value
		def = None()
		for _, k := range kw {
			switch k.name {
			case "attribute":
				attr = k.v
			case "default":
				def = k.v
			default:
				return Value{}, rtErrorf("FilterArgumentError", "Unexpected keyword argument %s", pyRepr(String(k.name)))
			}
		}
		fn = func(it Value) (Value, error) { return ev.attrGet(it, attr, &def) }
	} else {
		if len(args) == 0 {
			return Value{}, rtErrorf("FilterArgumentError", "map requires a filter argument")
		}
		name := pyStr(args[0])
		f, ok := filters[name]
		if !ok {
			return Value{}, rtErrorf("TemplateRuntimeError", "No filter named %s found.", pyRepr(String(name)))
		}
		rest := args[1:]
		fn = func(it Value) (Value, error) { return f(ev, it, rest, kw) }
	}
	out := make([]Value, 0, len(items))
	for _, it := range items {
		r, err := fn(it)
		if err != nil {
			return Value{}, err
		}
		out = append(out, r)
	}
	return newGen(out, "sync_do_map"), nil
}

func hasKw(kw []kwv, name string) bool {
	for _, k := range kw {
		if k.name == name {
			return true
		}
	}
	return false
}

func selectFilter(name string, keep, byAttr bool) filterFunc {
	return func(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
		if !v.Truth() {
			return newGen(nil, "select_or_reject"), nil
		}
		items, err := ev.iterate(v)
		if err != nil {
			return Value{}, err
		}
		off := 0
		var attr Value
		if byAttr {
			if len(args) == 0 {
				return Value{}, rtErrorf("FilterArgumentError", "Missing parameter for attribute name")
			}
			attr = args[0]
			off = 1
		}
		var test testFunc
		var targs []Value
		if len(args) > off {
			tname := pyStr(args[off])
			t, ok := tests[tname]
			if !ok {
				return Value{}, rtErrorf("TemplateRuntimeError", "No test named %s found.", pyRepr(String(tname)))
			}
			test, targs = t, args[off+1:]
		}
		var out []Value
		for _, it := range items {
			x := it
			if byAttr {
				if x, err = ev.attrGet(it, attr, nil); err != nil {
					return Value{}, err
				}
			}
			var ok bool
			if test != nil {
				if ok, err = test(ev, x, targs, kw); err != nil {
					return Value{}, err
				}
			} else {
				ok = x.Truth()
			}
			if ok == keep {
				out = append(out, it)
			}
		}
		return newGen(out, "select_or_reject"), nil
	}
}

func fAttr(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	a, err := bindArgs("do_attr", args, kw, []string{"name"}, []Value{{}}, 1)
	if err != nil {
		return Value{}, err
	}
	if a[0].kind != KindString {
		return Value{}, typeErrorf("attribute name must be string, not '%s'", pyTypeName(a[0]))
	}
	switch v.kind {
	case KindUndefined:
		return Value{}, undefinedError(v)
	case KindDict, KindList:
		// attr() does not fall back to items.
		if m := findMethod(v, a[0].s); m != nil {
			return bindMethod(v, a[0].s, m), nil
		}
		return undefinedAttr(v, a[0]), nil
	}
	return ev.getattr(v, a[0].s)
}

func fBatch(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	a, err := bindArgs("do_batch", args, kw, []string{"linecount", "fill_with"}, []Value{{}, None()}, 1)
	if err != nil {
		return Value{}, err
	}
	n, ok := a[0].Int64()
	if !ok || n <= 0 {
		return Value{}, valueErrorf("batch size must be a positive integer")
	}
	if a[1].kind != KindNone && n > maxListLen {
		return Value{}, errTooBig
	}
	items, err := ev.iterate(v)
	if err != nil {
		return Value{}, err
	}
	var out []Value
	for i := 0; i < len(items); i += int(n) {
		end := min(i+int(n), len(items))
		chunk := append([]Value(nil), items[i:end]...)
		if a[1].kind != KindNone {
			for len(chunk) < int(n) {
				chunk = append(chunk, a[1])
			}
		}
		out = append(out, NewList(chunk))
	}
	return newGen(out, "do_batch"), nil
}

func fSlice(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	a, err := bindArgs("do_slice", args, kw, []string{"slices", "fill_with"}, []Value{{}, None()}, 1)
	if err != nil {
		return Value{}, err
	}
	slices, ok := a[0].Int64()
	if !ok || slices <= 0 {
		return Value{}, rtErrorf("ZeroDivisionError", "integer division or modulo by zero")
	}
	if slices > maxListLen {
		return Value{}, errTooBig
	}
	seq, err := ev.iterate(v)
	if err != nil {
		return Value{}, err
	}
	n := len(seq)
	per := n / int(slices)
	extra := n % int(slices)
	offset := 0
	var out []Value
	for s := 0; s < int(slices); s++ {
		start := offset + s*per
		if s < extra {
			offset++
		}
		end := offset + (s+1)*per
		chunk := append([]Value(nil), seq[start:end]...)
		if a[1].kind != KindNone && s >= extra {
			chunk = append(chunk, a[1])
		}
		out = append(out, NewList(chunk))
	}
	return newGen(out, "do_slice"), nil
}

func fGroupby(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	a, err := bindArgs("do_groupby", args, kw, []string{"attribute", "default", "case_sensitive"}, []Value{{}, None(), Bool(false)}, 1)
	if err != nil {
		return Value{}, err
	}
	src, err := ev.iterate(v)
	if err != nil {
		return Value{}, err
	}
	items := append([]Value(nil), src...)
	keys := make([]Value, len(items))
	for i, it := range items {
		k, err := ev.attrGet(it, a[0], &a[1])
		if err != nil {
			return Value{}, err
		}
		if !a[2].Truth() {
			k = ignoreCase(k)
		}
		keys[i] = k
	}
	order := make([]Value, len(items))
	copy(order, keys)
	pairs := make([]Value, len(items))
	for i := range items {
		pairs[i] = NewTuple([]Value{keys[i], items[i]})
	}
	if err := sortValues(pairs, order, false); err != nil {
		return Value{}, err
	}
	var out []Value
	for i := 0; i < len(pairs); {
		k := pairs[i].list().Items[0]
		var group []Value
		j := i
		for j < len(pairs) && pyEqual(pairs[j].list().Items[0], k) {
			group = append(group, pairs[j].list().Items[1])
			j++
		}
		grouper := k
		if !a[2].Truth() {
			if grouper, err = ev.attrGet(group[0], a[0], &a[1]); err != nil {
				return Value{}, err
			}
		}
		gt := NewTuple([]Value{grouper, NewList(group)})
		gt.list().fields = []string{"grouper", "list"}
		out = append(out, gt)
		i = j
	}
	return NewList(out), nil
}
