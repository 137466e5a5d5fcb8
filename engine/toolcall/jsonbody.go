package toolcall

import (
	"bytes"
	"encoding/json"
	"strings"
)

// jsonBody collects a JSON call body while it stays valid JSON, up to the
// end of its top-level object.
func (p *Parser) jsonBody(eof bool) bool {
	s, i := p.in, p.pos
	for i < len(s) {
		// The bound counts bytes, wherever the input was cut: a body that
		// would grow past it fails here, complete or not.
		if len(p.jbuf)+i-p.pos >= maxJSONCall {
			p.jbuf = append(p.jbuf, s[p.pos:i]...)
			p.pos = i
			p.failJSON()
			return false
		}
		r := p.js.step(s[i])
		if r == jErr {
			p.jbuf = append(p.jbuf, s[p.pos:i]...)
			p.pos = i
			p.failJSON()
			return false
		}
		i++
		if r == jDone {
			p.jbuf = append(p.jbuf, s[p.pos:i]...)
			p.pos = i
			if !p.jsonKeyOK() {
				p.failJSON()
				return false
			}
			p.st = stJSONAfter
			return false
		}
	}
	p.jbuf = append(p.jbuf, s[p.pos:i]...)
	p.pos = i
	if eof || !p.jsonKeyOK() || len(p.jbuf) > maxJSONCall {
		p.failJSON()
		return false
	}
	return true
}

// jsonKeyOK checks, for a body without <tool_call> before it, that the
// object's first key is "name", so that ordinary JSON in a reply is given
// back as text without waiting for it to end.
func (p *Parser) jsonKeyOK() bool {
	if !p.keyCheck {
		return true
	}
	b := p.jbuf[1:]
	for len(b) > 0 && isJSONSpace(b[0]) {
		b = b[1:]
	}
	const key = `"name"`
	n := min(len(b), len(key))
	if string(b[:n]) != key[:n] {
		return false
	}
	if n == len(key) {
		p.keyCheck = false
	}
	return true
}

// jsonAfter looks for </tool_call> after a complete body. It is required
// when the opener was missing; otherwise it is optional. Stray '}' between
// the body and </tool_call> (a common slip) are skipped, but only when the
// closer does follow.
func (p *Parser) jsonAfter(eof bool) bool {
	s, i := p.in, p.pos
	j := i
	for j < len(s) && (isSpace(s[j]) || s[j] == '}') {
		j++
	}
	p.gap = append(p.gap, s[i:j]...)
	p.pos = j
	if j == len(s) && !eof {
		return true
	}
	closed := false
	switch match(s[j:], tagToolCallEnd) {
	case mFull:
		closed = true
	case mPartial:
		if !eof && j < len(s) {
			return true
		}
	}
	if !closed && (!p.jopener || bytes.IndexByte(p.gap, '}') >= 0) {
		p.failJSON()
		return false
	}
	name, args, ok := p.jsonCall(p.jbuf)
	if !ok {
		p.failJSON()
		return false
	}
	if closed {
		p.gap = p.gap[:0]
		p.pos = j + len(tagToolCallEnd)
	}
	p.preWS, p.jpre = "", ""
	p.startCall(name)
	p.args(args)
	p.argsOpen = true // the arguments are complete: endCall adds nothing
	p.flushArgs()
	p.events = append(p.events, Event{Kind: CallEnd, Index: p.index})
	p.index++
	p.toContent()
	return false
}

// startJSON begins collecting a JSON body at p.pos (its '{'). jpre is the
// text before it, empty for an opener-less body.
func (p *Parser) startJSON(jpre string, opener bool) {
	p.jpre = jpre
	p.jopener = opener
	p.keyCheck = !opener
	p.jbuf = p.jbuf[:0]
	p.js.reset()
	p.st = stJSON
}

// failJSON gives up a JSON call candidate: the whitespace before it and its
// first byte become content, and the rest of its text is read again as
// content, ahead of the input not yet consumed.
func (p *Parser) failJSON() {
	p.trackString(p.preWS)
	p.emitContent(p.preWS)
	var text string
	if p.jopener {
		p.trackByte(p.jpre[0])
		p.emitContent(p.jpre[:1])
		text = p.jpre[1:] + string(p.jbuf) + string(p.gap)
	} else {
		p.trackByte(p.jbuf[0])
		p.emitContent("{")
		text = string(p.jbuf[1:]) + string(p.gap)
	}
	p.preWS, p.jpre = "", ""
	p.jbuf = p.jbuf[:0]
	p.gap = p.gap[:0]
	p.st = stContent
	p.replay(text)
}

// jsonCall validates a complete body and returns the function name and the
// compact arguments.
func (p *Parser) jsonCall(body []byte) (name, args string, ok bool) {
	var v struct {
		Name       json.RawMessage `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
	}
	if json.Unmarshal(body, &v) != nil || json.Unmarshal(v.Name, &name) != nil {
		return "", "", false
	}
	if name = strings.TrimSpace(name); name == "" || !p.tools.declared(name) {
		return "", "", false
	}
	raw := v.Arguments
	if len(raw) == 0 {
		raw = v.Parameters
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		// Arguments given as a string holding the JSON object.
		var inner string
		if json.Unmarshal(raw, &inner) != nil {
			return "", "", false
		}
		raw = []byte(strings.TrimSpace(inner))
	}
	if len(raw) == 0 || string(raw) == "null" {
		return name, "{}", true
	}
	if raw[0] != '{' {
		return "", "", false
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return "", "", false
	}
	return name, b.String(), true
}
