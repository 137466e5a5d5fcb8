package constrain

import (
	"math"

	"github.com/infernix/infernix/engine/internal/utf8seq"
)

// The byte automaton. A configuration is the innermost container being
// written (its node, phase and counter) by value, the enclosing ones as a
// persistent linked list of frames, and the scalar lexer's state. Stepping
// a byte never mutates a configuration: it appends the successors, so
// configurations are shared freely between a state's alternatives and the
// vocabulary walk's levels.

// Whitespace between tokens is one space, or a newline and at most
// MaxIndent spaces or tabs (llama.cpp's JSON grammar allows the same), so
// that a model can pretty-print but not pad forever; before the document,
// at most MaxLeading whitespace bytes (Qwen3 writes "\n\n" after its think
// block).
const (
	MaxIndent  = 20
	MaxLeading = 4
)

// ws states of lexer.ws between tokens: none yet, after a space (nothing
// more), or wsNewline+k after a newline and k indentation bytes.
const (
	wsNone    = 0
	wsSpace   = 1
	wsNewline = 2
)

// maxNumberLen bounds a number's length, so that no model writes digits
// forever.
const maxNumberLen = 32

// maxExpand bounds the nesting of anyOf and $ref expanded at one value
// (a schema whose reference loops without a container in between).
const maxExpand = 24

// phase is where a configuration is within its container.
type phase uint8

const (
	pRootValue phase = iota // a value is expected
	pRootDone               // the document is complete
	pObjFirst               // after '{': a key or '}'
	pObjColon               // after a key: ':'
	pObjValue               // after ':': a value
	pObjNext                // after a value: ',' or '}'
	pObjKey                 // after ',': a key
	pArrFirst               // after '[': a value or ']'
	pArrNext                // after an item: ',' or ']'
	pArrValue               // after ',': a value
	pGram                   // in a GBNF grammar, at a character class (gbnf.go)
	pXParam                 // XML call arguments: a parameter's opening tag or </function>
	pXValue                 // after a parameter's opening tag: its value
	pXValEnd                // after a JSON value: the parameter's closing tag
)

// lexMode is the scalar being read, if any.
type lexMode uint8

const (
	lexNone   lexMode = iota
	lexString         // sub: strNormal, strEsc, strHex (n hex digits so far), strUTF8 (n bytes to go)
	lexNumber         // sub: a num* state; integer: no fraction or exponent
	lexLit            // matching lit.lits (or lit.keys when key) against cand, n bytes so far
	lexRaw            // an XML parameter's raw text; n: bytes of its closing tag matched (xml.go)
	lexXName          // an XML parameter's opening tag with a name of the model's (xml.go)
	lexText           // raw text matching a pattern (text.go); str: its node
	lexGram           // a GBNF character, maybe part-way through its UTF-8 bytes (gbnf.go)
)

const (
	strNormal uint8 = iota
	strEsc
	strHex
	strUTF8
)

const (
	numMinus uint8 = iota // '-'
	numZero               // a leading 0
	numInt                // integer digits
	numDot                // '.'
	numFrac               // fraction digits
	numE                  // 'e' or 'E'
	numESign              // the exponent's sign
	numExp                // exponent digits
)

type lexer struct {
	lit     *node
	cand    uint64
	n       uint16
	mode    lexMode
	sub     uint8
	ws      uint8 // whitespace bytes in a row at this point
	lo, hi  byte  // strUTF8: the range of the next byte
	integer bool
	key     bool
	// A string with constraints on its decoded runes (str: its node, with
	// the length bounds and the pattern): runes so far, the rune being
	// decoded (UTF-8 bytes or \u digits), the pattern's state.
	str  *node
	cnt  uint32
	code rune
	rx   *rxState
	// A bounded number (num: its node): the digits' value so far (all of
	// them, the fraction's too: frac of them follow the point), and its
	// sign.
	num  *node
	val  int64
	neg  bool
	frac uint8
}

type frame struct {
	node  *node
	up    *frame
	idx   int32
	phase phase
}

type config struct {
	lex   lexer
	node  *node // the container (or, at the root, the document's schema)
	up    *frame
	idx   int32 // object: the next property's index (or the key matched); array: items so far
	phase phase
}

func isWS(b byte) bool { return b == ' ' || b == '\n' || b == '\t' || b == '\r' }

// start is the configuration before any byte.
func start(root *node) config { return config{node: root, phase: pRootValue} }

// final reports whether the document may end in c.
func (c *config) final() bool {
	if c.up != nil || c.phase != pRootDone {
		return false
	}
	switch c.lex.mode {
	case lexNone:
		return true
	case lexNumber:
		return c.lex.numDone()
	case lexLit:
		return c.lex.litDone()
	case lexText:
		return c.lex.sub == strNormal && c.lex.rx.final
	}
	return false
}

func numFinal(s uint8) bool { return s == numZero || s == numInt || s == numFrac || s == numExp }

// numDone reports whether the number may end here: complete, and within
// its bounds.
func (l *lexer) numDone() bool {
	if !numFinal(l.sub) {
		return false
	}
	if l.num == nil {
		return true
	}
	if l.num.kind == kNumber {
		return l.decDone()
	}
	v := l.val
	if l.neg {
		v = -v
	}
	return v >= l.num.lo && v <= l.num.hi && (l.num.mult == 0 || v%l.num.mult == 0)
}

// feasible reports whether some number that starts with what the lexer has
// read lies within its node's bounds.
func (l *lexer) feasible() bool {
	if l.num.kind == kNumber {
		return l.decFeasible()
	}
	return l.intFeasible()
}

// intFeasible reports whether some integer that starts with the digits so
// far (none yet: only the sign) lies within the bounds (and is a multiple
// of the node's mult).
func (l *lexer) intFeasible() bool {
	n := l.num
	lo, hi := n.lo, n.hi
	if l.neg {
		// The magnitude's bounds: [-hi, -lo] (saturating).
		lo, hi = negSat(hi), negSat(lo)
	}
	// fits reports whether the magnitudes [a, b] meet the bounds.
	fits := func(a, b int64) bool {
		a, b = max(a, lo), min(b, hi)
		if n.mult > 0 {
			return hasMultiple(a, b, n.mult)
		}
		return a <= b
	}
	switch l.sub {
	case numMinus:
		if n.mult > 0 {
			return hasMultiple(n.lo, min(n.hi, 0), n.mult)
		}
		return n.lo <= 0
	case numZero:
		return fits(0, 0)
	}
	v := l.val
	if v > hi {
		return false
	}
	if fits(v, v) {
		return true
	}
	// Longer numbers v·10^j … v·10^j + 10^j − 1.
	for p := int64(10); ; p *= 10 {
		if v > (math.MaxInt64-p+1)/p {
			return false // past every bound
		}
		a := v * p
		if a > hi {
			return false
		}
		if fits(a, a+p-1) {
			return true
		}
		if p > math.MaxInt64/10 {
			return false
		}
	}
}

func negSat(x int64) int64 {
	if x == math.MinInt64 {
		return math.MaxInt64
	}
	return -x
}

// litDone reports whether a candidate is complete.
func (l *lexer) litDone() bool {
	tab := l.table()
	for m := l.cand; m != 0; m &= m - 1 {
		if len(tab[trailing(m)]) == int(l.n) {
			return true
		}
	}
	return false
}

func (l *lexer) table() []string {
	if l.key {
		return l.lit.keys
	}
	return l.lit.lits
}

func trailing(m uint64) int {
	n := 0
	for m&1 == 0 {
		m >>= 1
		n++
	}
	return n
}

// step appends to out the configurations c becomes after b.
func step(c config, b byte, out []config) []config {
	switch c.lex.mode {
	case lexString:
		if c.lex.stringByte(b) {
			out = append(out, c)
		}
		return out
	case lexNumber:
		if c.lex.numberByte(b) {
			return append(out, c)
		}
		if !c.lex.numDone() {
			return out
		}
		c.lex = lexer{}
		return structural(c, b, out)
	case lexLit:
		return c.litByte(b, out)
	case lexRaw:
		return c.rawByte(b, out)
	case lexXName:
		return c.xnameByte(b, out)
	case lexText:
		if c.lex.textByte(b) {
			out = append(out, c)
		}
		return out
	case lexGram:
		return c.gramByte(b, out)
	}
	return structural(c, b, out)
}

// stringByte advances a string by b (in place), reporting whether b is
// allowed. The closing quote ends the lexer.
func (l *lexer) stringByte(b byte) bool {
	switch l.sub {
	case strNormal:
		switch {
		case b == '"':
			if l.str != nil && !l.strCanEnd() {
				return false
			}
			*l = lexer{}
		case b == '\\':
			// An escape writes a character of the BMP (not a surrogate):
			// allowed only if the string may take one of them next.
			if l.str != nil && !l.escOK(0, 0xFFFF) {
				return false
			}
			l.sub = strEsc
		case b < 0x20:
			return false
		case b < 0x80:
			return l.str == nil || l.addRune(rune(b))
		default:
			return l.utf8Begin(b) && l.pendingOK()
		}
	case strEsc:
		l.sub = strNormal
		switch b {
		case '"', '\\', '/':
			return l.str == nil || l.addRune(rune(b))
		case 'b', 'f', 'n', 'r', 't':
			return l.str == nil || l.addRune(rune(escaped[b]))
		case 'u':
			if l.str != nil && !l.escOK(0, 0xFFFF) {
				return false
			}
			l.sub, l.n, l.code = strHex, 0, 0
		default:
			return false
		}
	case strHex:
		if !isHex(b) {
			return false
		}
		l.code = l.code<<4 | rune(hexVal(b))
		if l.n++; l.n == 4 {
			l.sub = strNormal
			if l.str != nil {
				// Surrogate escapes would need their pair to make a rune; a
				// constrained string takes the character itself instead.
				if l.code >= 0xD800 && l.code <= 0xDFFF {
					return false
				}
				return l.addRune(l.code)
			}
		} else if l.str != nil {
			// The code points the digits so far may still make.
			k := 4 * (4 - l.n)
			lo := l.code << k
			return l.escOK(lo, lo|(1<<k-1))
		}
	case strUTF8:
		done, ok := l.utf8More(b)
		if done && l.str != nil {
			return l.addRune(l.code)
		}
		return ok && (done || l.pendingOK())
	}
	return true
}

var escaped = [256]byte{'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

func hexVal(b byte) byte {
	switch {
	case b >= 'a':
		return b - 'a' + 10
	case b >= 'A':
		return b - 'A' + 10
	}
	return b - '0'
}

// addRune counts a constrained string's rune and advances its pattern,
// reporting whether the string may still meet its constraints.
func (l *lexer) addRune(c rune) bool {
	n := l.str
	if n.maxLen >= 0 && l.cnt >= uint32(n.maxLen) {
		return false
	}
	l.cnt++
	l.code = 0
	if l.rx != nil {
		l.rx = l.rx.next(c)
		if l.rx.dead {
			return false
		}
	}
	return true
}

// escOK reports whether a constrained string may take next some character
// in lo…hi (of the BMP) that an escape may still write: within its maximum
// length, and one its pattern can take. Surrogates make no character (a
// constrained string takes no surrogate escapes), so an escape, or a \u
// escape's first digits, is allowed only then: no escape is begun that no
// continuation can complete.
func (l *lexer) escOK(lo, hi rune) bool {
	n := l.str
	if n.maxLen >= 0 && l.cnt >= uint32(n.maxLen) {
		return false
	}
	const surLo, surHi = 0xD800, 0xDFFF
	if lo < surLo && (l.rx == nil || l.rx.takes(lo, min(hi, surLo-1))) {
		return true
	}
	return hi > surHi && (l.rx == nil || l.rx.takes(max(lo, surHi+1), hi))
}

// strCanEnd reports whether a constrained string may close here.
func (l *lexer) strCanEnd() bool {
	return l.cnt >= uint32(l.str.minLen) && (l.rx == nil || l.rx.final)
}

// beginString is the lexer of a string of node n after its opening quote.
func beginString(n *node) lexer {
	l := lexer{mode: lexString}
	if n.minLen > 0 || n.maxLen >= 0 || n.rx != nil {
		l.str = n
		if n.rx != nil {
			l.rx = n.rx.start
		}
	}
	return l
}

func isHex(b byte) bool { return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F' }

// utf8Begin starts a multi-byte character at lead byte b (l.sub strUTF8,
// l.n its bytes to go, l.code its bits), reporting whether b leads one.
func (l *lexer) utf8Begin(b byte) bool {
	n, lo, hi := utf8seq.Lead(b)
	if n == 0 {
		return false
	}
	l.sub, l.n, l.lo, l.hi = strUTF8, uint16(n-1), lo, hi
	l.code = rune(b) & (0x7F >> n)
	return true
}

// pending is the range of code points that the character utf8Begin
// started may still complete to: its next byte within lo…hi, any
// continuation bytes after it (a contiguous range, since the bytes are the
// code point's bits from the highest).
func (l *lexer) pending() (lo, hi rune) {
	k := 6 * (uint(l.n) - 1) // the bits of the bytes after the next
	lo = (l.code<<6 | rune(l.lo&0x3F)) << k
	hi = (l.code<<6|rune(l.hi&0x3F))<<k | (1<<k - 1)
	return lo, hi
}

// pendingOK reports whether a constrained string's (or raw text's) partial
// character may still complete to one that the string takes next: within
// its maximum length, and one its pattern can take. A lead byte or a
// character's first bytes are allowed only then, so that no token leaves
// the output where no byte may follow.
func (l *lexer) pendingOK() bool {
	n := l.str
	if n == nil {
		return true
	}
	if n.maxLen >= 0 && l.cnt >= uint32(n.maxLen) {
		return false
	}
	return l.rx == nil || l.rx.admits(l.pending())
}

// utf8More adds continuation byte b to the character utf8Begin started:
// ok reports whether b may come here, done whether the character (l.code)
// is complete, l.sub back at strNormal.
func (l *lexer) utf8More(b byte) (done, ok bool) {
	if b < l.lo || b > l.hi {
		return false, false
	}
	l.lo, l.hi = 0x80, 0xBF
	l.code = l.code<<6 | rune(b&0x3F)
	if l.n--; l.n > 0 {
		return false, true
	}
	l.sub = strNormal
	return true, true
}

// numberByte advances a number by b (in place), reporting whether b
// continues it.
func (l *lexer) numberByte(b byte) bool {
	if l.n >= maxNumberLen {
		return false
	}
	digit := b >= '0' && b <= '9'
	next := l.sub
	switch l.sub {
	case numMinus:
		switch {
		case b == '0':
			next = numZero
		case digit:
			next = numInt
		default:
			return false
		}
	case numZero, numInt:
		switch {
		case digit && l.sub == numInt:
		case b == '.' && !l.integer:
			next = numDot
		case (b == 'e' || b == 'E') && !l.integer && l.num == nil: // a bounded number has no exponent
			next = numE
		default:
			return false
		}
	case numDot, numFrac:
		switch {
		case digit:
			next = numFrac
		case (b == 'e' || b == 'E') && l.sub == numFrac && l.num == nil:
			next = numE
		default:
			return false
		}
	case numE:
		switch {
		case b == '+' || b == '-':
			next = numESign
		case digit:
			next = numExp
		default:
			return false
		}
	case numESign, numExp:
		if !digit {
			return false
		}
		next = numExp
	}
	l.sub = next
	l.n++
	if l.num != nil {
		if digit {
			d := int64(b - '0')
			if l.val > (math.MaxInt64-d)/10 {
				return false // beyond every int64 bound (a number's mantissa: its digits)
			}
			l.val = l.val*10 + d
			if next == numFrac {
				l.frac++
			}
		}
		return l.feasible()
	}
	return true
}

// litByte advances a literal (an enum value, or an object's key) by b. A
// candidate that completes while longer ones continue forks the
// configuration: one where the literal ended (b then belongs to what
// follows) is handled by the caller seeing the ended literal before b.
func (c config) litByte(b byte, out []config) []config {
	tab := c.lex.table()
	n := int(c.lex.n)
	var keep uint64
	done := false
	for m := c.lex.cand; m != 0; m &= m - 1 {
		i := trailing(m)
		s := tab[i]
		switch {
		case len(s) == n:
			done = true
		case s[n] == b:
			keep |= 1 << i
		}
	}
	if done && !c.lex.key {
		// The literal may have ended before b (an enum's "1" against "12").
		e := c
		e.lex = lexer{}
		out = structural(e, b, out)
	}
	if keep == 0 {
		return out
	}
	c.lex.cand, c.lex.n = keep, uint16(n+1)
	if c.lex.key {
		// Keys end with their closing quote (in XML, their ">\n"), so a key
		// is matched when its last byte is.
		for m := keep; m != 0; m &= m - 1 {
			if i := trailing(m); len(tab[i]) == n+1 {
				if k := c.lex.lit.kind; k == kXCall || k == kXArgs {
					return xmlKeyDone(c, i, out)
				}
				c.lex = lexer{}
				c.idx, c.phase = int32(i), pObjColon
				return append(out, c)
			}
		}
		return append(out, c)
	}
	if c.lex.litDone() && keep&(keep-1) == 0 {
		c.lex = lexer{} // the only candidate is complete: nothing can follow within it
	}
	return append(out, c)
}

// whitespace advances the whitespace run by b (in place), reporting
// whether b is allowed; leading: before the document.
func (l *lexer) whitespace(b byte, leading bool) bool {
	if leading {
		if l.ws >= MaxLeading {
			return false
		}
		l.ws++
		return true
	}
	switch {
	case b == ' ' && l.ws == wsNone:
		l.ws = wsSpace
	case b == '\n' && l.ws == wsNone:
		l.ws = wsNewline
	case (b == ' ' || b == '\t') && l.ws >= wsNewline && l.ws < wsNewline+MaxIndent:
		l.ws++
	default:
		return false
	}
	return true
}

// structural handles b between scalars.
func structural(c config, b byte, out []config) []config {
	if c.phase >= pXParam {
		return xmlStructural(c, b, out)
	}
	if c.phase == pRootValue && c.up == nil && c.node.raw {
		// Raw text: its first byte is the text's, whitespace or not.
		c.phase = pRootDone
		return beginValue(c, c.node, b, out, 0)
	}
	if isWS(b) {
		if c.phase == pRootDone {
			// After the document: the root's trail of whitespace bytes
			// (lex.ws counts them), so that a token such as `"}}\n` may end it.
			if c.up != nil || c.lex.ws >= c.node.trail {
				return out
			}
			c.lex.ws++
			return append(out, c)
		}
		if !c.lex.whitespace(b, c.phase == pRootValue && c.up == nil) {
			return out
		}
		return append(out, c)
	}
	c.lex.ws = 0
	n := c.node
	switch c.phase {
	case pRootValue:
		c.phase = pRootDone
		return beginValue(c, n, b, out, 0)
	case pRootDone:
		return out
	case pObjFirst, pObjKey:
		if b == '}' && c.phase == pObjFirst && !n.requiresFrom(0) {
			return pop(c, out)
		}
		if b != '"' {
			return out
		}
		if n.props == nil {
			if n.extra == nil {
				return out
			}
			c.phase = pObjColon
			c.lex = lexer{mode: lexString}
			return append(out, c)
		}
		cand := n.nextProps(int(c.idx))
		if cand == 0 {
			return out
		}
		c.lex = lexer{mode: lexLit, lit: n, key: true, cand: cand, n: 1}
		return append(out, c)
	case pObjColon:
		if b != ':' {
			return out
		}
		c.phase = pObjValue
		return append(out, c)
	case pObjValue:
		v := n.extra
		if n.props != nil {
			v = n.props[c.idx].value
			c.idx++
		}
		c.phase = pObjNext
		return beginValue(c, v, b, out, 0)
	case pObjNext:
		switch b {
		case ',':
			if n.props != nil && int(c.idx) >= len(n.props) {
				return out
			}
			c.phase = pObjKey
			return append(out, c)
		case '}':
			if n.requiresFrom(int(c.idx)) {
				return out
			}
			return pop(c, out)
		}
		return out
	case pArrFirst:
		if b == ']' {
			if n.minItems > 0 {
				return out
			}
			return pop(c, out)
		}
		if n.maxItems == 0 {
			return out
		}
		c.phase, c.idx = pArrNext, c.idx+1
		return beginValue(c, n.items, b, out, 0)
	case pArrNext:
		switch b {
		case ',':
			if n.maxItems >= 0 && int(c.idx) >= n.maxItems {
				return out
			}
			c.phase = pArrValue
			return append(out, c)
		case ']':
			if int(c.idx) < n.minItems {
				return out
			}
			return pop(c, out)
		}
		return out
	case pArrValue:
		c.phase, c.idx = pArrNext, c.idx+1
		return beginValue(c, n.items, b, out, 0)
	}
	return out
}

// nextProps is the set of properties that may come next, from index i:
// each up to and including the first required one.
func (n *node) nextProps(i int) uint64 {
	var cand uint64
	for ; i < len(n.props); i++ {
		cand |= 1 << i
		if n.props[i].required {
			break
		}
	}
	return cand
}

func (n *node) requiresFrom(i int) bool {
	return n.props != nil && i < len(n.reqFrom) && n.reqFrom[i]
}

// pop closes the current container.
func pop(c config, out []config) []config {
	f := c.up
	c.node, c.phase, c.idx, c.up = f.node, f.phase, f.idx, f.up
	return append(out, c)
}

// anyObject and anyArray are the containers of kAny values.
var (
	anyValue  = &node{kind: kAny, id: -1, maxItems: -1}
	anyObject = &node{kind: kObject, id: -2, extra: anyValue, maxItems: -1}
	anyArray  = &node{kind: kArray, id: -3, items: anyValue, maxItems: -1}
	boolLits  = &node{kind: kLiteral, id: -4, lits: []string{"true", "false"}, maxItems: -1}
	nullLits  = &node{kind: kLiteral, id: -5, lits: []string{"null"}, maxItems: -1}
	anyString = &node{kind: kString, id: -6, maxItems: -1, maxLen: -1}
	anyNumber = &node{kind: kNumber, id: -7, maxItems: -1}
)

// beginValue starts a value of node n with byte b; c's phase is already
// what follows the value.
func beginValue(c config, n *node, b byte, out []config, depth int) []config {
	switch n.kind {
	case kUnion:
		if depth >= maxExpand {
			return out
		}
		for _, a := range n.alts {
			out = beginValue(c, a, b, out, depth+1)
		}
		return out
	case kAny:
		switch {
		case b == '{':
			n = anyObject
		case b == '[':
			n = anyArray
		case b == '"':
			n = anyString
		case b == '-' || b >= '0' && b <= '9':
			n = anyNumber
		case b == 't' || b == 'f':
			n = boolLits
		case b == 'n':
			n = nullLits
		default:
			return out
		}
		return beginValue(c, n, b, out, depth)
	case kXCall:
		return xmlBegin(c, n, b, out)
	case kText:
		c.lex = lexer{mode: lexText, str: n, rx: n.rx.start}
		if c.lex.textByte(b) {
			out = append(out, c)
		}
		return out
	case kObject:
		if b != '{' {
			return out
		}
		return push(c, n, pObjFirst, out)
	case kArray:
		if b != '[' {
			return out
		}
		return push(c, n, pArrFirst, out)
	case kString:
		if b != '"' {
			return out
		}
		c.lex = beginString(n)
		return append(out, c)
	case kNumber, kInteger:
		c.lex = lexer{mode: lexNumber, sub: numMinus, integer: n.kind == kInteger}
		switch {
		case b == '-':
		case b == '0':
			c.lex.sub = numZero
		case b >= '1' && b <= '9':
			c.lex.sub = numInt
		default:
			return out
		}
		c.lex.n = 1
		if n.bounded {
			c.lex.num, c.lex.neg = n, b == '-'
			if b != '-' {
				c.lex.val = int64(b - '0')
			}
			if !c.lex.feasible() {
				return out
			}
		}
		return append(out, c)
	case kLiteral:
		var cand uint64
		for i, s := range n.lits {
			if s[0] == b {
				cand |= 1 << i
			}
		}
		if cand == 0 {
			return out
		}
		c.lex = lexer{mode: lexLit, lit: n, cand: cand, n: 1}
		if c.lex.litDone() && cand&(cand-1) == 0 {
			c.lex = lexer{}
		}
		return append(out, c)
	}
	return out
}

// push opens a container; the enclosing one resumes at c's phase.
func push(c config, n *node, ph phase, out []config) []config {
	f := &frame{node: c.node, up: c.up, idx: c.idx, phase: c.phase}
	c.node, c.up, c.idx, c.phase = n, f, 0, ph
	c.lex = lexer{}
	return append(out, c)
}
