package jinja

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// filterFunc implements one filter: v is the filtered value.
type filterFunc func(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error)

var filters map[string]filterFunc

func init() {
	filters = map[string]filterFunc{
		"abs":        fAbs,
		"attr":       fAttr,
		"batch":      fBatch,
		"capitalize": strFilter("capitalize", pyCapitalize),
		"center":     fCenter,
		"count":      fLength,
		"d":          fDefault,
		"default":    fDefault,
		"dictsort":   fDictsort,
		"e":          fEscape,
		"escape":     fEscape,
		"first":      fFirst,
		"float":      fFloat,
		"forceescape": func(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
			if _, err := bindArgs("forceescape", args, kw, nil, nil, 0); err != nil {
				return Value{}, err
			}
			s, err := pyStrErr(v)
			return Markup(htmlEscape(s)), err
		},
		"format":     fFormat,
		"groupby":    fGroupby,
		"indent":     fIndent,
		"int":        fInt,
		"items":      fItems,
		"join":       fJoin,
		"last":       fLast,
		"length":     fLength,
		"list":       fList,
		"lower":      strFilter("lower", pyLower),
		"map":        fMap,
		"max":        minMaxFilter("max", 1),
		"min":        minMaxFilter("min", -1),
		"reject":     selectFilter("reject", false, false),
		"rejectattr": selectFilter("rejectattr", false, true),
		"replace":    fReplace,
		"reverse":    fReverse,
		"round":      fRound,
		"safe":       fSafe,
		"select":     selectFilter("select", true, false),
		"selectattr": selectFilter("selectattr", true, true),
		"slice":      fSlice,
		"sort":       fSort,
		"string":     fString,
		"striptags":  fStriptags,
		"sum":        fSum,
		"title":      strFilter("title", jinjaTitle),
		"tojson":     fTojson,
		"trim":       fTrim,
		"truncate":   fTruncate,
		"unique":     fUnique,
		"upper":      strFilter("upper", pyUpper),
		"wordcount":  fWordcount,
	}
}

// softStr is markupsafe.soft_str: strings (and Markup) unchanged, other
// values converted with str().
func softStr(v Value) (Value, error) {
	if v.kind == KindString {
		return v, nil
	}
	s, err := pyStrErr(v)
	return String(s), err
}

func strFilter(name string, f func(string) string) filterFunc {
	return func(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
		if _, err := bindArgs(name, args, kw, nil, nil, 0); err != nil {
			return Value{}, err
		}
		s, err := softStr(v)
		if err != nil {
			return Value{}, err
		}
		return Value{kind: KindString, s: f(s.s), flag: s.flag}, nil
	}
}

var wordBeginningSplit = regexp.MustCompile(`[-\s({\[<]+`)

// jinjaTitle is the title filter: each chunk between separators gets its
// first character upper-cased and the rest lower-cased.
func jinjaTitle(s string) string {
	var sb strings.Builder
	last := 0
	emit := func(item string) {
		if item == "" {
			return
		}
		r, size := utf8.DecodeRuneInString(item)
		sb.WriteString(pyUpper(string(r)))
		sb.WriteString(pyLower(item[size:]))
	}
	for _, m := range wordBeginningSplitIndex(s) {
		emit(s[last:m[0]])
		emit(s[m[0]:m[1]])
		last = m[1]
	}
	emit(s[last:])
	return sb.String()
}

// wordBeginningSplitIndex finds runs of [-\s({\[<] with Python's Unicode \s.
func wordBeginningSplitIndex(s string) [][2]int {
	var out [][2]int
	start := -1
	for i, r := range s {
		sep := pyIsSpace(r) || strings.ContainsRune("-({[<", r)
		if sep && start < 0 {
			start = i
		} else if !sep && start >= 0 {
			out = append(out, [2]int{start, i})
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, [2]int{start, len(s)})
	}
	return out
}

func fTrim(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	a, err := bindArgs("do_trim", args, kw, []string{"chars"}, []Value{None()}, 0)
	if err != nil {
		return Value{}, err
	}
	s, err := softStr(v)
	if err != nil {
		return Value{}, err
	}
	var chars *string
	if a[0].kind != KindNone {
		if a[0].kind != KindString {
			return Value{}, typeErrorf("strip arg must be None or str")
		}
		c := a[0].s
		chars = &c
	}
	return Value{kind: KindString, s: pyStrip(s.s, chars, true, true), flag: s.flag}, nil
}

func fString(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	if _, err := bindArgs("soft_str", args, kw, nil, nil, 0); err != nil {
		return Value{}, err
	}
	return softStr(v)
}

func fSafe(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	if _, err := bindArgs("do_mark_safe", args, kw, nil, nil, 0); err != nil {
		return Value{}, err
	}
	s, err := pyStrErr(v)
	return Markup(s), err
}

func fEscape(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	if _, err := bindArgs("escape", args, kw, nil, nil, 0); err != nil {
		return Value{}, err
	}
	if v.isSafe() {
		return v, nil
	}
	s, err := pyStrErr(v)
	return Markup(htmlEscape(s)), err
}

func fDefault(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	a, err := bindArgs("do_default", args, kw, []string{"default_value", "boolean"}, []Value{String(""), Bool(false)}, 0)
	if err != nil {
		return Value{}, err
	}
	if v.kind == KindUndefined || (a[1].Truth() && !v.Truth()) {
		return a[0], nil
	}
	return v, nil
}

func fReplace(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	a, err := bindArgs("do_replace", args, kw, []string{"old", "new", "count"}, []Value{{}, {}, None()}, 2)
	if err != nil {
		return Value{}, err
	}
	s, err := pyStrErr(v)
	if err != nil {
		return Value{}, err
	}
	old, err := pyStrErr(a[0])
	if err != nil {
		return Value{}, err
	}
	nw, err := pyStrErr(a[1])
	if err != nil {
		return Value{}, err
	}
	n := int64(-1)
	if a[2].kind != KindNone {
		var ok bool
		if n, ok = a[2].Int64(); !ok {
			return Value{}, typeErrorf("'%s' object cannot be interpreted as an integer", pyTypeName(a[2]))
		}
	}
	r, err := pyReplace(s, old, nw, int(n))
	return String(r), err
}

func fCenter(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	a, err := bindArgs("do_center", args, kw, []string{"width"}, []Value{Int(80)}, 0)
	if err != nil {
		return Value{}, err
	}
	s, err := softStr(v)
	if err != nil {
		return Value{}, err
	}
	w, ok := a[0].Int64()
	if !ok {
		return Value{}, typeErrorf("'%s' object cannot be interpreted as an integer", pyTypeName(a[0]))
	}
	if w > maxStringLen {
		return Value{}, errTooBig
	}
	return Value{kind: KindString, s: pyPad(s.s, int(w), " ", "center"), flag: s.flag}, nil
}

func fIndent(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	a, err := bindArgs("do_indent", args, kw, []string{"width", "first", "blank"}, []Value{Int(4), Bool(false), Bool(false)}, 0)
	if err != nil {
		return Value{}, err
	}
	if v.kind == KindUndefined {
		return Value{}, undefinedError(v)
	}
	if v.kind != KindString {
		return Value{}, typeErrorf("unsupported operand type(s) for +=: '%s' and 'str'", pyTypeName(v))
	}
	var ind string
	if a[0].kind == KindString {
		ind = a[0].s
	} else {
		n, ok := a[0].Int64()
		if !ok {
			return Value{}, typeErrorf("can't multiply sequence by non-int of type '%s'", pyTypeName(a[0]))
		}
		if n > 0 {
			if n > maxStringLen {
				return Value{}, errTooBig
			}
			ind = strings.Repeat(" ", int(n))
		}
	}
	lines := pySplitLines(v.s+"\n", false, -1)
	var sb strings.Builder
	if a[2].Truth() {
		for i, l := range lines {
			if i > 0 {
				sb.WriteString("\n")
				sb.WriteString(ind)
			}
			sb.WriteString(l)
			if sb.Len() > maxStringLen {
				return Value{}, errTooBig
			}
		}
	} else {
		sb.WriteString(lines[0])
		for _, l := range lines[1:] {
			sb.WriteString("\n")
			if l != "" {
				sb.WriteString(ind)
			}
			sb.WriteString(l)
			if sb.Len() > maxStringLen {
				return Value{}, errTooBig
			}
		}
	}
	out := sb.String()
	if a[1].Truth() {
		if len(ind)+len(out) > maxStringLen {
			return Value{}, errTooBig
		}
		out = ind + out
	}
	return Value{kind: KindString, s: out, flag: v.flag}, nil
}

var wordRe = regexp.MustCompile(`[\p{L}\p{N}_]+`)

func fWordcount(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	if _, err := bindArgs("do_wordcount", args, kw, nil, nil, 0); err != nil {
		return Value{}, err
	}
	s, err := pyStrErr(v)
	if err != nil {
		return Value{}, err
	}
	return Int(int64(len(wordRe.FindAllStringIndex(s, -1)))), nil
}

var tagRe = regexp.MustCompile(`(?s)<!--.*?-->|<[^>]*>`)

func fStriptags(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	if _, err := bindArgs("do_striptags", args, kw, nil, nil, 0); err != nil {
		return Value{}, err
	}
	s, err := pyStrErr(v)
	if err != nil {
		return Value{}, err
	}
	s = tagRe.ReplaceAllString(s, "")
	s = strings.Join(pySplitWhitespace(s, -1, false), " ")
	return String(htmlUnescapeBasic(s)), nil
}

func htmlUnescapeBasic(s string) string {
	r := strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">", "&#39;", "'", "&#34;", "\"", "&quot;", "\"")
	return r.Replace(s)
}

func fTruncate(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	a, err := bindArgs("do_truncate", args, kw, []string{"length", "killwords", "end", "leeway"},
		[]Value{Int(255), Bool(false), String("..."), None()}, 0)
	if err != nil {
		return Value{}, err
	}
	if v.kind != KindString {
		return Value{}, typeErrorf("object of type '%s' has no len()", pyTypeName(v))
	}
	length, ok := a[0].Int64()
	end := pyStr(a[2])
	leeway := int64(5)
	if a[3].kind != KindNone {
		leeway, _ = a[3].Int64()
	}
	if !ok || length < int64(pyLen(end)) || leeway < 0 {
		return Value{}, rtErrorf("AssertionError", "expected length >= %d, got %d", pyLen(end), length)
	}
	r := []rune(v.s)
	if int64(len(r)) <= length+leeway {
		return v, nil
	}
	cut := string(r[:length-int64(pyLen(end))])
	if a[1].Truth() {
		return String(cut + end), nil
	}
	if i := strings.LastIndex(cut, " "); i >= 0 {
		cut = cut[:i]
	}
	return String(cut + end), nil
}

func fTojson(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	a, err := bindArgs("tojson", args, kw, []string{"ensure_ascii", "indent", "separators", "sort_keys"},
		[]Value{Bool(false), None(), None(), Bool(false)}, 0)
	if err != nil {
		return Value{}, err
	}
	o := JSONOptions{EnsureASCII: a[0].Truth(), SortKeys: a[3].Truth()}
	switch a[1].kind {
	case KindNone:
	case KindString:
		s := a[1].s
		o.Indent = &s
	case KindInt, KindBool:
		n, _ := a[1].Int64()
		if n > 1<<16 {
			return Value{}, errTooBig
		}
		s := ""
		if n > 0 {
			s = strings.Repeat(" ", int(n))
		}
		o.Indent = &s
	default:
		return Value{}, typeErrorf("can't multiply sequence by non-int of type '%s'", pyTypeName(a[1]))
	}
	if a[2].kind != KindNone {
		items, err := ev.iterate(a[2])
		if err != nil || len(items) != 2 || items[0].kind != KindString || items[1].kind != KindString {
			return Value{}, valueErrorf("separators must be a pair of strings")
		}
		o.ItemSep, o.KeySep, o.separatorSet = items[0].s, items[1].s, true
	}
	s, err := DumpJSON(v, o)
	if err != nil {
		return Value{}, err
	}
	return String(s), nil
}

func fFormat(ev *evaluator, v Value, args []Value, kw []kwv) (Value, error) {
	if len(args) > 0 && len(kw) > 0 {
		return Value{}, rtErrorf("FilterArgumentError", "can't handle positional and keyword arguments at the same time")
	}
	s, err := softStr(v)
	if err != nil {
		return Value{}, err
	}
	if len(kw) > 0 {
		d := NewDict()
		for _, k := range kw {
			d.SetStr(k.name, k.v)
		}
		return percentFormat(s, DictValue(d))
	}
	return percentFormat(s, NewTuple(args))
}
