package toolcall

// jscan checks JSON syntax one byte at a time, so that a streamed call body
// can be rejected as soon as it stops being JSON and its end is found
// without re-reading it. It accepts exactly one object (the caller feeds the
// opening '{' first) and reports when that object closes.
type jscan struct {
	stack []byte // open containers, '{' or '['
	st    jstate
	lit   string // rest of the literal being matched (true, false, null)
	hex   int    // hex digits still expected after \u
	key   bool   // the string being read is an object key
}

type jstate uint8

const (
	jsStart    jstate = iota // before the top-level '{'
	jsValue                  // a value is expected
	jsObjFirst               // after '{': a key or '}'
	jsObjKey                 // after ',' in an object: a key
	jsColon                  // after a key: ':'
	jsAfter                  // after a value: ',' or a closer
	jsArrFirst               // after '[': a value or ']'
	jsStr
	jsEsc
	jsHex
	jsLit
	jsNumMinus // after '-': a digit
	jsNumZero  // after a leading 0
	jsNumInt   // in integer digits
	jsNumDot   // after '.': a digit
	jsNumFrac  // in fraction digits
	jsNumE     // after e/E: sign or digit
	jsNumESign // after the exponent sign: a digit
	jsNumExp   // in exponent digits
)

// Results of step.
const (
	jOK   = iota // byte accepted, object still open
	jDone        // byte accepted and it closed the top-level object
	jErr         // byte is not valid JSON here
)

func (j *jscan) reset() {
	j.stack = j.stack[:0]
	j.st = jsStart
	j.lit = ""
	j.hex = 0
	j.key = false
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// step consumes one byte.
func (j *jscan) step(c byte) int {
	for {
		switch j.st {
		case jsStart:
			if c != '{' {
				return jErr
			}
			j.stack = append(j.stack, '{')
			j.st = jsObjFirst
			return jOK
		case jsValue, jsArrFirst:
			if isJSONSpace(c) {
				return jOK
			}
			if c == ']' && j.st == jsArrFirst {
				return j.close(c)
			}
			return j.beginValue(c)
		case jsObjFirst, jsObjKey:
			switch {
			case isJSONSpace(c):
				return jOK
			case c == '"':
				j.st, j.key = jsStr, true
				return jOK
			case c == '}' && j.st == jsObjFirst:
				return j.close(c)
			}
			return jErr
		case jsColon:
			if isJSONSpace(c) {
				return jOK
			}
			if c != ':' {
				return jErr
			}
			j.st = jsValue
			return jOK
		case jsAfter:
			switch {
			case isJSONSpace(c):
				return jOK
			case c == ',':
				if j.stack[len(j.stack)-1] == '{' {
					j.st = jsObjKey
				} else {
					j.st = jsValue
				}
				return jOK
			case c == '}' || c == ']':
				return j.close(c)
			}
			return jErr
		case jsStr:
			switch {
			case c == '"':
				if j.key {
					j.st, j.key = jsColon, false
				} else {
					j.st = jsAfter
				}
			case c == '\\':
				j.st = jsEsc
			case c < 0x20:
				return jErr
			}
			return jOK
		case jsEsc:
			switch c {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j.st = jsStr
			case 'u':
				j.st, j.hex = jsHex, 4
			default:
				return jErr
			}
			return jOK
		case jsHex:
			if !isHex(c) {
				return jErr
			}
			if j.hex--; j.hex == 0 {
				j.st = jsStr
			}
			return jOK
		case jsLit:
			if c != j.lit[0] {
				return jErr
			}
			if j.lit = j.lit[1:]; j.lit == "" {
				j.st = jsAfter
			}
			return jOK
		case jsNumMinus, jsNumDot, jsNumESign:
			if !isDigit(c) {
				return jErr
			}
			switch j.st {
			case jsNumMinus:
				j.st = jsNumInt
				if c == '0' {
					j.st = jsNumZero
				}
			case jsNumDot:
				j.st = jsNumFrac
			default:
				j.st = jsNumExp
			}
			return jOK
		case jsNumZero, jsNumInt, jsNumFrac:
			switch {
			case isDigit(c) && j.st != jsNumZero:
				return jOK
			case c == '.' && j.st != jsNumFrac:
				j.st = jsNumDot
				return jOK
			case c == 'e' || c == 'E':
				j.st = jsNumE
				return jOK
			}
			j.st = jsAfter // the number ended; c belongs to what follows
		case jsNumE:
			if c == '+' || c == '-' {
				j.st = jsNumESign
				return jOK
			}
			if !isDigit(c) {
				return jErr
			}
			j.st = jsNumExp
			return jOK
		case jsNumExp:
			if isDigit(c) {
				return jOK
			}
			j.st = jsAfter
		default:
			return jErr
		}
	}
}

func (j *jscan) beginValue(c byte) int {
	switch {
	case c == '{':
		j.stack = append(j.stack, '{')
		j.st = jsObjFirst
	case c == '[':
		j.stack = append(j.stack, '[')
		j.st = jsArrFirst
	case c == '"':
		j.st = jsStr
	case c == '-':
		j.st = jsNumMinus
	case c == '0':
		j.st = jsNumZero
	case c >= '1' && c <= '9':
		j.st = jsNumInt
	case c == 't':
		j.st, j.lit = jsLit, "rue"
	case c == 'f':
		j.st, j.lit = jsLit, "alse"
	case c == 'n':
		j.st, j.lit = jsLit, "ull"
	default:
		return jErr
	}
	return jOK
}

func (j *jscan) close(c byte) int {
	want := byte('{')
	if c == ']' {
		want = '['
	}
	if j.stack[len(j.stack)-1] != want {
		return jErr
	}
	j.stack = j.stack[:len(j.stack)-1]
	if len(j.stack) == 0 {
		j.st = jsStart // nothing may follow inside this scan
		return jDone
	}
	j.st = jsAfter
	return jOK
}

func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}
