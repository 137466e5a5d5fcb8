package toolcall

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// appendEscaped appends s as the inside of a JSON string. The escaping is
// decided byte by byte (bytes ≥ 0x80 pass through), so escaping a value in
// pieces gives the same text as escaping it whole, whatever the cut points.
func appendEscaped(dst []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			const hex = "0123456789abcdef"
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	return append(dst, s[start:]...)
}

// appendString appends s as a quoted JSON string.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s)
	return append(dst, '"')
}

// appendValue appends the JSON value for a parameter whose raw text is raw
// and whose schema declares the types ks, tried in order. A value that none
// of them accepts is kept as a string (raw, untrimmed).
func appendValue(dst []byte, raw string, ks []kind) []byte {
	v := strings.TrimSpace(raw)
	for _, k := range ks {
		switch k {
		case kInteger:
			if s, ok := asInteger(v); ok {
				return append(dst, s...)
			}
		case kNumber:
			if s, ok := asNumber(v); ok {
				return append(dst, s...)
			}
		case kBoolean:
			if strings.EqualFold(v, "true") {
				return append(dst, "true"...)
			}
			if strings.EqualFold(v, "false") {
				return append(dst, "false"...)
			}
		case kNull:
			// Python-rendered templates print None; models copy that.
			if strings.EqualFold(v, "null") || v == "None" {
				return append(dst, "null"...)
			}
		case kObject, kArray:
			open := byte('{')
			if k == kArray {
				open = '['
			}
			if len(v) > 0 && v[0] == open {
				var b bytes.Buffer
				if json.Compact(&b, []byte(v)) == nil {
					return append(dst, b.Bytes()...)
				}
			}
		}
	}
	return appendString(dst, raw)
}

// isJSONNumber reports whether s is a number in JSON's grammar.
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	return i == len(s)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// asInteger accepts a JSON integer of any size as written, or a number with
// an integral value ("5.0", "+5", "1e3") small enough to be exact.
func asInteger(v string) (string, bool) {
	if isJSONNumber(v) && !strings.ContainsAny(v, ".eE") {
		return v, true
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 || strings.ContainsAny(v, "xXpP_") {
		return "", false
	}
	return strconv.FormatInt(int64(f), 10), true
}

// asNumber accepts a JSON number as written, or a finite decimal Go can read
// ("+5", ".5", "5."), rewritten in JSON form.
func asNumber(v string) (string, bool) {
	if isJSONNumber(v) {
		return v, true
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || strings.ContainsAny(v, "xXpP_nN") {
		return "", false
	}
	return strconv.FormatFloat(f, 'g', -1, 64), true
}
