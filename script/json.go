package script

import (
	"fmt"
	"math"
	"strconv"

	"go.starlark.net/starlark"
)

// maxJSONDepth bounds nesting when encoding a returned value.
const maxJSONDepth = 64

// maxJSONBytes bounds the JSON text of a returned value: encoding runs
// after the call, outside its step limit and timeout, and a list that
// repeats one big string (["x" * (1 << 24)] * 4096, one step) would
// otherwise be written out in full.
const maxJSONBytes = 64 << 20

// appendJSON appends v as compact JSON, keeping dict insertion order (the
// order a model wrote the arguments in) and escaping strings as the
// built-in tool-call parser does (bytes ≥ 0x80 pass through), so a script
// parser can produce byte-identical arguments.
func appendJSON(b []byte, v starlark.Value, depth int) ([]byte, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxJSONDepth)
	}
	if len(b) > maxJSONBytes {
		return nil, fmt.Errorf("JSON text longer than %d bytes", maxJSONBytes)
	}
	switch v := v.(type) {
	case starlark.NoneType:
		return append(b, "null"...), nil
	case starlark.Bool:
		return strconv.AppendBool(b, bool(v)), nil
	case starlark.Int:
		return append(b, v.String()...), nil
	case starlark.Float:
		f := float64(v)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("cannot encode non-finite float %v", f)
		}
		return strconv.AppendFloat(b, f, 'g', -1, 64), nil
	case starlark.String:
		return appendJSONString(b, string(v)), nil
	case rawJSON:
		return append(b, v...), nil
	case *starlark.Dict:
		b = append(b, '{')
		for i, it := range v.Items() {
			k, ok := starlark.AsString(it[0])
			if !ok {
				return nil, fmt.Errorf("dict key of type %s, want a string", it[0].Type())
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			var err error
			if b, err = appendJSON(b, it[1], depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case *starlark.List, starlark.Tuple: // not any Indexable: a range or bytes is no JSON array
		l := v.(starlark.Indexable)
		b = append(b, '[')
		for i := 0; i < l.Len(); i++ {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSON(b, l.Index(i), depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	return nil, fmt.Errorf("cannot encode a %s as JSON", v.Type())
}

func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		default:
			const hex = "0123456789abcdef"
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
