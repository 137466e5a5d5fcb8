package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Fast readers for the two big parts of tokenizer.json, the vocab object and
// the merges array (about 300K strings for Qwen). encoding/json through
// reflection takes most of a second on them; these take a few tens of
// milliseconds. The input has already passed json.Unmarshal (as a
// json.RawMessage), so it is valid JSON; a string with escapes is handed to
// encoding/json to keep its exact decoding rules.

type jsonScanner struct {
	data []byte
	pos  int
}

var errJSONShape = errors.New("unexpected JSON structure")

func (s *jsonScanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek skips whitespace and returns the next byte, or 0 at the end.
func (s *jsonScanner) peek() byte {
	s.ws()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

func (s *jsonScanner) expect(c byte) error {
	if s.peek() != c {
		return fmt.Errorf("%w: want %q at offset %d", errJSONShape, c, s.pos)
	}
	s.pos++
	return nil
}

// str reads a JSON string.
func (s *jsonScanner) str() (string, error) {
	if err := s.expect('"'); err != nil {
		return "", err
	}
	start := s.pos
	escaped := false
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case '\\':
			escaped = true
			s.pos += 2
			continue
		case '"':
			s.pos++
			if !escaped {
				return string(s.data[start : s.pos-1]), nil
			}
			var out string
			if err := json.Unmarshal(s.data[start-1:s.pos], &out); err != nil {
				return "", err
			}
			return out, nil
		}
		s.pos++
	}
	return "", fmt.Errorf("%w: unterminated string", errJSONShape)
}

// integer reads a JSON number that must be an integer.
func (s *jsonScanner) integer() (int64, error) {
	s.ws()
	start := s.pos
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		if (c < '0' || c > '9') && c != '-' && c != '+' && c != '.' && c != 'e' && c != 'E' {
			break
		}
		s.pos++
	}
	return strconv.ParseInt(string(s.data[start:s.pos]), 10, 64)
}

// listSep consumes ',' and returns true, or consumes close and returns false.
func (s *jsonScanner) listSep(close byte) (bool, error) {
	switch s.peek() {
	case ',':
		s.pos++
		return true, nil
	case close:
		s.pos++
		return false, nil
	}
	return false, fmt.Errorf("%w: want ',' or %q at offset %d", errJSONShape, close, s.pos)
}

// scanVocab reads {"token": id, ...}; fn is called for each entry.
func scanVocab(raw []byte, fn func(tok string, id int64) error) error {
	s := &jsonScanner{data: raw}
	if s.peek() == 'n' { // null
		return nil
	}
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		return nil
	}
	for {
		k, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		v, err := s.integer()
		if err != nil {
			return fmt.Errorf("vocab %q: %w", k, err)
		}
		if err := fn(k, v); err != nil {
			return err
		}
		more, err := s.listSep('}')
		if err != nil || !more {
			return err
		}
	}
}

// scanMerges reads the merges in either form HF writes: ["a b", ...] or
// [["a", "b"], ...].
func scanMerges(raw []byte) ([][2]string, error) {
	s := &jsonScanner{data: raw}
	if s.peek() == 'n' || s.peek() == 0 { // null or absent
		return nil, nil
	}
	if err := s.expect('['); err != nil {
		return nil, err
	}
	var out [][2]string
	if s.peek() == ']' {
		return out, nil
	}
	for {
		var pair [2]string
		if s.peek() == '[' {
			s.pos++
			for k := 0; ; k++ {
				part, err := s.str()
				if err != nil {
					return nil, err
				}
				if k < 2 {
					pair[k] = part
				}
				more, err := s.listSep(']')
				if err != nil {
					return nil, err
				}
				if !more {
					if k != 1 {
						return nil, fmt.Errorf("merge %d has %d parts, want 2", len(out), k+1)
					}
					break
				}
			}
		} else {
			line, err := s.str()
			if err != nil {
				return nil, err
			}
			a, b, ok := cutSpace(line)
			if !ok {
				return nil, fmt.Errorf("merge %d %q is not two space-separated tokens", len(out), line)
			}
			pair = [2]string{a, b}
		}
		out = append(out, pair)
		more, err := s.listSep(']')
		if err != nil {
			return nil, err
		}
		if !more {
			return out, nil
		}
	}
}

// cutSpace splits "a b" at its only space, as HF requires.
func cutSpace(line string) (string, string, bool) {
	i := -1
	for j := 0; j < len(line); j++ {
		if line[j] == ' ' {
			if i >= 0 {
				return "", "", false
			}
			i = j
		}
	}
	if i < 0 {
		return "", "", false
	}
	return line[:i], line[i+1:], true
}

// skipString moves past a JSON string without decoding it.
func (s *jsonScanner) skipString() error {
	if err := s.expect('"'); err != nil {
		return err
	}
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case '\\':
			s.pos += 2
			continue
		case '"':
			s.pos++
			return nil
		}
		s.pos++
	}
	return fmt.Errorf("%w: unterminated string", errJSONShape)
}

// rawValue returns the bytes of the next JSON value. Only its nesting is
// checked; the parts this package uses are decoded strictly afterwards.
func (s *jsonScanner) rawValue() ([]byte, error) {
	start := s.pos
	switch s.peek() {
	case '"':
		start = s.pos
		if err := s.skipString(); err != nil {
			return nil, err
		}
	case '{', '[':
		start = s.pos
		depth := 0
		for s.pos < len(s.data) {
			switch s.data[s.pos] {
			case '"':
				if err := s.skipString(); err != nil {
					return nil, err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.pos++
			if depth == 0 {
				return s.data[start:s.pos], nil
			}
		}
		return nil, fmt.Errorf("%w: unterminated value", errJSONShape)
	case 0:
		return nil, fmt.Errorf("%w: missing value at offset %d", errJSONShape, s.pos)
	default:
		start = s.pos
		for s.pos < len(s.data) {
			c := s.data[s.pos]
			if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
				break
			}
			s.pos++
		}
	}
	return s.data[start:s.pos], nil
}

// scanObject splits a JSON object into its members' raw values.
func scanObject(raw []byte) (map[string]json.RawMessage, error) {
	s := &jsonScanner{data: raw}
	if err := s.expect('{'); err != nil {
		return nil, err
	}
	out := map[string]json.RawMessage{}
	if s.peek() == '}' {
		s.pos++
	} else {
		for {
			k, err := s.str()
			if err != nil {
				return nil, err
			}
			if err := s.expect(':'); err != nil {
				return nil, err
			}
			v, err := s.rawValue()
			if err != nil {
				return nil, err
			}
			out[k] = v
			more, err := s.listSep('}')
			if err != nil {
				return nil, err
			}
			if !more {
				break
			}
		}
	}
	if s.peek() != 0 {
		return nil, fmt.Errorf("%w: data after the object at offset %d", errJSONShape, s.pos)
	}
	return out, nil
}
