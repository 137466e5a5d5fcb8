package jinja

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// Python str semantics that differ from Go's strings package: Unicode
// whitespace as Python defines it, code point indexing, full case mapping.

// bindArgs binds positional and keyword arguments to names like a Python
// signature; defaults[i] applies to names[i] when i >= nreq.
func bindArgs(fname string, args []Value, kw []kwv, names []string, defaults []Value, nreq int) ([]Value, error) {
	if len(args) > len(names) {
		return nil, typeErrorf("%s() takes at most %d arguments (%d given)", fname, len(names), len(args))
	}
	out := make([]Value, len(names))
	set := make([]bool, len(names))
	for i, a := range args {
		out[i], set[i] = a, true
	}
	for _, k := range kw {
		found := false
		for i, n := range names {
			if n == k.name {
				if set[i] {
					return nil, typeErrorf("%s() got multiple values for argument '%s'", fname, n)
				}
				out[i], set[i], found = k.v, true, true
				break
			}
		}
		if !found {
			return nil, typeErrorf("%s() got an unexpected keyword argument '%s'", fname, k.name)
		}
	}
	for i := range names {
		if set[i] {
			continue
		}
		if i < nreq {
			return nil, typeErrorf("%s() missing required argument '%s'", fname, names[i])
		}
		out[i] = defaults[i]
	}
	return out, nil
}

// pyStrip is str.strip/lstrip/rstrip; chars nil means whitespace.
func pyStrip(s string, chars *string, left, right bool) string {
	f := pyIsSpace
	if chars != nil {
		set := *chars
		f = func(r rune) bool { return strings.ContainsRune(set, r) }
	}
	if left {
		s = strings.TrimLeftFunc(s, f)
	}
	if right {
		s = strings.TrimRightFunc(s, f)
	}
	return s
}

// pySplitWhitespace is str.split()/rsplit() with no separator.
func pySplitWhitespace(s string, maxsplit int, right bool) []string {
	var out []string
	if !right {
		rest := strings.TrimLeftFunc(s, pyIsSpace)
		for rest != "" {
			if maxsplit >= 0 && len(out) == maxsplit {
				out = append(out, rest)
				return out
			}
			i := strings.IndexFunc(rest, pyIsSpace)
			if i < 0 {
				out = append(out, rest)
				return out
			}
			out = append(out, rest[:i])
			rest = strings.TrimLeftFunc(rest[i:], pyIsSpace)
		}
		return out
	}
	rest := strings.TrimRightFunc(s, pyIsSpace)
	for rest != "" {
		if maxsplit >= 0 && len(out) == maxsplit {
			out = append(out, rest)
			break
		}
		i := strings.LastIndexFunc(rest, pyIsSpace)
		if i < 0 {
			out = append(out, rest)
			break
		}
		_, size := utf8.DecodeRuneInString(rest[i:])
		out = append(out, rest[i+size:])
		rest = strings.TrimRightFunc(rest[:i], pyIsSpace)
	}
	reverse(out)
	return out
}

func reverse[T any](s []T) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

// pySplitSep is str.split(sep, maxsplit)/rsplit.
func pySplitSep(s, sep string, maxsplit int, right bool) []string {
	if !right {
		if maxsplit < 0 {
			return strings.Split(s, sep)
		}
		return strings.SplitN(s, sep, maxsplit+1)
	}
	var out []string
	rest := s
	for maxsplit < 0 || len(out) < maxsplit {
		i := strings.LastIndex(rest, sep)
		if i < 0 {
			break
		}
		out = append(out, rest[i+len(sep):])
		rest = rest[:i]
	}
	out = append(out, rest)
	reverse(out)
	return out
}

func isLineBreak(r rune) bool {
	switch r {
	case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
		return true
	}
	return false
}

// pySplitLines is str.splitlines(keepends); with limit >= 0 it stops once it
// has more than limit lines.
func pySplitLines(s string, keepends bool, limit int) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); {
		if limit >= 0 && len(out) > limit {
			return out // more than limit lines: the rest is not split
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if !isLineBreak(r) {
			i += size
			continue
		}
		end := i + size
		if r == '\r' && end < len(s) && s[end] == '\n' {
			end++
		}
		if keepends {
			out = append(out, s[start:end])
		} else {
			out = append(out, s[start:i])
		}
		start = end
		i = end
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// pyReplace is str.replace(old, new, count).
func pyReplace(s, old, nw string, count int) (string, error) {
	n := count
	if n < 0 {
		n = -1
	}
	occ := strings.Count(s, old)
	if n >= 0 && occ > n {
		occ = n
	}
	if len(s)+occ*(len(nw)-len(old)) > maxStringLen {
		return "", errTooBig
	}
	return strings.Replace(s, old, nw, n), nil
}

func pyLower(s string) string {
	if isASCII(s) {
		return strings.ToLower(s)
	}
	return cases.Lower(language.Und).String(s)
}

func pyUpper(s string) string {
	if isASCII(s) {
		return strings.ToUpper(s)
	}
	return cases.Upper(language.Und).String(s)
}

func isCased(r rune) bool { return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) }

// pyTitle is str.title: a cased character after a cased one is lowered,
// any other is title-cased.
func pyTitle(s string) string {
	var sb strings.Builder
	prev := false
	for _, r := range s {
		if prev {
			sb.WriteString(pyLower(string(r)))
		} else {
			sb.WriteRune(unicode.ToTitle(r))
		}
		prev = isCased(r)
	}
	return sb.String()
}

// pyCapitalize is str.capitalize (Python 3.8+: title-case the first
// character, lower the rest).
func pyCapitalize(s string) string {
	if s == "" {
		return s
	}
	r, size := utf8.DecodeRuneInString(s)
	return string(unicode.ToTitle(r)) + pyLower(s[size:])
}

func pySwapcase(s string) string {
	var sb strings.Builder
	for _, r := range s {
		switch {
		case unicode.IsUpper(r):
			sb.WriteString(pyLower(string(r)))
		case unicode.IsLower(r):
			sb.WriteString(pyUpper(string(r)))
		default:
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

func pyIsDecimal(r rune) bool { return unicode.Is(unicode.Nd, r) }
func pyIsDigit(r rune) bool {
	return unicode.Is(unicode.Nd, r) || strings.ContainsRune("¹²³⁰⁴⁵⁶⁷⁸⁹₀₁₂₃₄₅₆₇₈₉", r)
}
func pyIsNumeric(r rune) bool { return unicode.IsNumber(r) }
func pyIsAlpha(r rune) bool   { return unicode.IsLetter(r) }
func pyIsAlnum(r rune) bool   { return pyIsAlpha(r) || pyIsNumeric(r) }

func pyIsLowerStr(s string) bool {
	cased := false
	for _, r := range s {
		if unicode.IsUpper(r) || unicode.IsTitle(r) {
			return false
		}
		if unicode.IsLower(r) {
			cased = true
		}
	}
	return cased
}

func pyIsUpperStr(s string) bool {
	cased := false
	for _, r := range s {
		if unicode.IsLower(r) || unicode.IsTitle(r) {
			return false
		}
		if unicode.IsUpper(r) {
			cased = true
		}
	}
	return cased
}

// pyPad is str.center/ljust/rjust.
func pyPad(s string, width int, fill, how string) string {
	n := utf8.RuneCountInString(s)
	marg := width - n
	if marg <= 0 {
		return s
	}
	var left int
	switch how {
	case "ljust":
		left = 0
	case "rjust":
		left = marg
	default:
		left = marg/2 + (marg & width & 1)
	}
	return strings.Repeat(fill, left) + s + strings.Repeat(fill, marg-left)
}

func pyZfill(s string, width int) string {
	n := utf8.RuneCountInString(s)
	if width <= n {
		return s
	}
	pad := strings.Repeat("0", width-n)
	if s != "" && (s[0] == '+' || s[0] == '-') {
		return s[:1] + pad + s[1:]
	}
	return pad + s
}

// pyLen is len() of a string in code points.
func pyLen(s string) int {
	if isASCII(s) {
		return len(s)
	}
	return utf8.RuneCountInString(s)
}
