package constrain

import (
	"encoding/json"
	"fmt"

	"github.com/infernix/infernix/engine/internal/utf8seq"
)

// The XML tool format (Qwen3-Coder, Qwen3.5): after <tool_call>,
//
//	<function=NAME>
//	<parameter=KEY>
//	VALUE
//	</parameter>
//	…
//	</function>
//
// A string parameter's VALUE is raw text (anything up to its closing tag);
// an enum's is one of its values written raw; booleans are true or false
// (or Python's True and False, as templates render them); other values are
// JSON of their schema. Parameters come in the schema's order, required
// ones never skipped, as in the JSON format.

// xValEnd closes a parameter's value.
const xValEnd = "\n</parameter>\n"

// xEndLit is xValEnd as a literal, after a JSON value.
var xEndLit = &node{kind: kLiteral, id: -8, lits: []string{xValEnd}, maxItems: -1, maxLen: -1}

// xRawText is a value of any text (a string parameter, or one whose schema
// admits strings), xRawAny its node when the schema is anything.
var xRawAny = &node{kind: kAny, id: -9, maxItems: -1, maxLen: -1}

const (
	xFuncOpen  = "<function="
	xParamOpen = "<parameter="
	xFuncEnd   = "</function>"
)

// ToolCallXML compiles the grammar of one tool call's body in the XML
// format for any of tools (at most 64, each with at most 63 parameters),
// with at most two whitespace bytes after it. Tool.Strict as for ToolCall.
// A string parameter's pattern and length bounds hold for its raw text.
func ToolCallXML(tools []Tool) (*Grammar, error) {
	if len(tools) == 0 || len(tools) > maxAlternatives {
		return nil, fmt.Errorf("constrained decoding: %d tools (the XML format takes 1 to %d)", len(tools), maxAlternatives)
	}
	c := &compiler{}
	root := c.newNode(kXCall)
	for i, t := range tools {
		args, err := c.toolArguments(t)
		if err != nil {
			return nil, &ToolError{Index: i, Err: err}
		}
		x, err := c.xmlArgs(args, t.Strict, "")
		if err != nil {
			return nil, &ToolError{Index: i, Err: err}
		}
		root.props = append(root.props, prop{value: x, required: true})
		root.keys = append(root.keys, xFuncOpen+t.Name+">\n")
	}
	root.trail = maxCloseSpace
	return &Grammar{root: root, nodes: c.nodes}, nil
}

// unwrap skips the one-member unions that stand for $ref.
func unwrap(n *node) *node {
	for i := 0; n.kind == kUnion && len(n.alts) == 1 && i < maxExpand; i++ {
		n = n.alts[0]
	}
	return n
}

// xmlArgs turns a tool's arguments (an object's node) into its parameters.
func (c *compiler) xmlArgs(args *node, strict bool, path string) (*node, *SchemaError) {
	obj := unwrap(args)
	x := c.newNode(kXArgs)
	if obj.kind != kObject || obj.props == nil {
		x.extra = xRawAny
		if obj.kind == kObject && obj.extra != nil {
			x.extra = c.xmlValue(obj.extra)
		}
		x.keys = []string{xFuncEnd}
		x.reqFrom = []bool{false}
		return x, nil
	}
	if len(obj.props) >= maxAlternatives {
		return nil, &SchemaError{path + "/properties", fmt.Sprintf("more than %d parameters", maxAlternatives-1)}
	}
	for i, p := range obj.props {
		v := c.xmlValue(p.value)
		x.props = append(x.props, prop{value: v, required: p.required})
		var key string
		_ = json.Unmarshal([]byte(obj.keys[i]), &key)
		x.keys = append(x.keys, xParamOpen+key+">\n")
	}
	x.keys = append(x.keys, xFuncEnd)
	x.reqFrom = obj.reqFrom
	return x, nil
}

// xmlValue is how a parameter of schema n is written: raw text where n
// admits strings (xRawAny; a string with a pattern or length bounds: a raw
// kString, which the raw text must meet), its values raw for an enum, else
// JSON of n.
func (c *compiler) xmlValue(n *node) *node {
	n = unwrap(n)
	if n.kind == kString && (n.rx != nil || n.minLen > 0 || n.maxLen >= 0) {
		r := c.newNode(kString)
		r.rx, r.minLen, r.maxLen, r.raw = n.rx, n.minLen, n.maxLen, true
		return r
	}
	if admitsString(n, 0) {
		return xRawAny
	}
	if n.kind == kLiteral {
		l := c.newNode(kLiteral)
		for _, s := range n.lits {
			var v any
			if json.Unmarshal([]byte(s), &v) == nil {
				if str, ok := v.(string); ok {
					s = str
				}
			}
			l.lits = append(l.lits, s+xValEnd)
			switch s {
			case "true":
				l.lits = append(l.lits, "True"+xValEnd)
			case "false":
				l.lits = append(l.lits, "False"+xValEnd)
			}
		}
		if len(l.lits) > maxAlternatives {
			return xRawAny
		}
		return l
	}
	return n
}

func admitsString(n *node, depth int) bool {
	switch n.kind {
	case kString, kAny:
		return true
	case kUnion:
		if depth >= maxExpand {
			return true
		}
		for _, a := range n.alts {
			if admitsString(a, depth+1) {
				return true
			}
		}
	}
	return false
}

// xmlBegin starts a call's body at its first byte: a <function=…> tag.
func xmlBegin(c config, n *node, b byte, out []config) []config {
	if b != '<' {
		return out
	}
	var cand uint64
	for i := range n.keys {
		cand |= 1 << i
	}
	c.lex = lexer{mode: lexLit, lit: n, key: true, cand: cand, n: 1}
	return append(out, c)
}

// xmlKeyDone follows a completed tag i of an XML node: a function's opens
// its parameters; a parameter's expects its value; </function> ends them.
func xmlKeyDone(c config, i int, out []config) []config {
	n := c.lex.lit
	c.lex = lexer{}
	if n.kind == kXCall {
		return push(c, n.props[i].value, pXParam, out)
	}
	if i == len(n.props) {
		return pop(c, out)
	}
	c.idx, c.phase = int32(i)+1, pXValue
	return append(out, c)
}

// xmlStructural handles b in the XML phases.
func xmlStructural(c config, b byte, out []config) []config {
	n := c.node
	switch c.phase {
	case pXParam:
		if b != '<' {
			return out
		}
		if n.props == nil {
			// Names of the model's: the tag by bytes, or </function>.
			x := c
			x.lex = lexer{mode: lexXName, n: 1}
			out = append(out, x)
			c.lex = lexer{mode: lexLit, lit: n, key: true, cand: 1, n: 1}
			return append(out, c)
		}
		cand := n.nextProps(int(c.idx))
		if !n.requiresFrom(int(c.idx)) {
			cand |= 1 << len(n.props)
		}
		c.lex = lexer{mode: lexLit, lit: n, key: true, cand: cand, n: 1}
		return append(out, c)
	case pXValue:
		v := n.extra
		if n.props != nil {
			v = n.props[c.idx-1].value
		}
		c.phase = pXParam
		switch {
		case v == xRawAny:
			c.lex = lexer{mode: lexRaw}
			return c.rawByte(b, out)
		case v.kind == kString && v.raw:
			c.lex = beginString(v)
			c.lex.mode = lexRaw
			return c.rawByte(b, out)
		case v.kind == kLiteral:
			return beginValue(c, v, b, out, 0)
		}
		c.phase = pXValEnd
		return beginValue(c, v, b, out, 0)
	case pXValEnd:
		if b != '\n' {
			return out
		}
		c.phase = pXParam
		c.lex = lexer{mode: lexLit, lit: xEndLit, cand: 1, n: 1}
		return append(out, c)
	}
	return out
}

// rawByte advances a raw value by b: text of valid UTF-8 (no control
// characters but tab, newline and carriage return) up to xValEnd, which
// ends it. lex.n counts xValEnd's bytes matched (text, should the tag not
// follow); lex.cnt a UTF-8 sequence's bytes to go. A constrained string's
// (lex.str: pattern, length) runes go through addRune instead, lex.n then
// also counting a UTF-8 sequence's bytes to go (no tag is being matched
// then), and the tag may close it only where the string may end.
func (c config) rawByte(b byte, out []config) []config {
	l := &c.lex
	if l.sub == strUTF8 {
		if l.str != nil {
			done, ok := l.utf8More(b)
			if !ok || done && !l.addRune(l.code) || !done && !l.pendingOK() {
				return out
			}
			return append(out, c)
		}
		if b < l.lo || b > l.hi {
			return out
		}
		l.lo, l.hi = 0x80, 0xBF
		if l.cnt--; l.cnt == 0 {
			l.sub = strNormal
		}
		return append(out, c)
	}
	if b == xValEnd[l.n] {
		if l.str != nil && !l.rawTagOK() {
			return out
		}
		if l.n++; int(l.n) == len(xValEnd) {
			c.lex = lexer{} // the phase is already pXParam
		}
		return append(out, c)
	}
	// What matched of the closing tag was text.
	if l.str != nil {
		for _, t := range []byte(xValEnd[:l.n]) {
			if !l.addRune(rune(t)) {
				return out
			}
		}
	}
	l.n = 0
	if b == '\n' {
		if l.str != nil && !l.rawTagOK() {
			return out
		}
		l.n = 1
		return append(out, c)
	}
	switch {
	case b < 0x20 && b != '\t' && b != '\r':
		return out
	case b >= 0x80:
		if l.str != nil {
			if !l.utf8Begin(b) || !l.pendingOK() {
				return out
			}
			return append(out, c)
		}
		k, lo, hi := utf8seq.Lead(b)
		if k == 0 {
			return out
		}
		l.sub, l.cnt, l.lo, l.hi = strUTF8, uint32(k-1), lo, hi
	case l.str != nil && !l.addRune(rune(b)):
		return out
	}
	return append(out, c)
}

// rawTagOK reports whether a constrained raw string may take the closing
// tag's next byte: the tag would close it where it may end, or, before the
// tag's last byte, the bytes matched and this one may be its text.
func (l *lexer) rawTagOK() bool {
	if l.strCanEnd() {
		return true
	}
	if int(l.n)+1 == len(xValEnd) {
		return false
	}
	t := *l
	for _, b := range []byte(xValEnd[:l.n+1]) {
		if !t.addRune(rune(b)) {
			return false
		}
	}
	return true
}

// xnameByte reads an opening tag with the model's name: "<parameter=",
// then a name of bytes other than '<', '>' and control characters, then
// ">\n" (lex.sub: 0 in the prefix, 1 in the name, 2 after '>'; lex.n:
// bytes of the prefix or name so far).
func (c config) xnameByte(b byte, out []config) []config {
	l := &c.lex
	switch l.sub {
	case 0:
		if b != xParamOpen[l.n] {
			return out
		}
		if l.n++; int(l.n) == len(xParamOpen) {
			l.sub, l.n = 1, 0
		}
	case 1:
		switch {
		case b == '>' && l.n > 0:
			l.sub = 2
		case b == '<' || b == '>' || b < 0x20 || l.n >= 128:
			return out
		default:
			l.n++
		}
	case 2:
		if b != '\n' {
			return out
		}
		c.lex = lexer{}
		c.phase = pXValue
	}
	return append(out, c)
}
