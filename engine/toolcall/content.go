package toolcall

import "strings"

const (
	tagToolCall     = "<tool_call>"
	tagToolCallEnd  = "</tool_call>"
	tagFunction     = "<function"
	tagFunctionEnd  = "</function>"
	tagParameter    = "<parameter"
	tagParameterEnd = "</parameter>"
)

// funcOpeners start an XML call header: '=' is the template's form, a space
// the damaged <function name="f"> form. Parameters have the same two forms.
var funcOpeners = []string{"<function=", "<function "}

// content handles reply text outside calls. Plain bytes are written as one
// substring of the input; only '<', '{' at a line start and whitespace runs
// need a closer look.
func (p *Parser) content(eof bool) bool {
	s, i := p.in, p.pos
	start := i
	if len(p.pre) > 0 {
		// Whitespace held from earlier input: what follows decides its fate.
		j := skipSpace(s, i)
		p.trackString(s[i:j])
		p.pre = append(p.pre, s[i:j]...)
		p.pos = j
		if j == len(s) {
			if !eof {
				return true
			}
			if !p.afterCall {
				p.emitContent(string(p.pre))
			}
			p.pre = p.pre[:0]
			return true
		}
		if s[j] == '<' || s[j] == '{' {
			k, n, name := p.candidate(s, j, eof, p.lineStart, p.inCode)
			switch k {
			case candMore:
				return true
			case candNo:
			default:
				ws := string(p.pre)
				p.pre = p.pre[:0]
				p.begin(k, ws, s, j, n, name)
				return false
			}
		}
		p.emitContent(string(p.pre))
		p.pre = p.pre[:0]
		p.trackByte(s[j])
		start, i = j, j+1
	}
	for i < len(s) {
		c := s[i]
		if p.fence != 0 {
			if c == '\n' && p.fenceCloses() {
				// The fence ends here; its newline is read again as
				// whitespace outside, where a call may follow it.
				p.fence = 0
				continue
			}
			p.trackByte(c)
			i++
			continue
		}
		if p.runLen > 0 && c != p.runChar {
			p.endRun()
			if p.fence != 0 {
				continue
			}
		}
		switch {
		case isSpace(c):
			j := skipSpace(s, i)
			if j == len(s) {
				if eof && p.afterCall {
					p.emitContent(s[start:i]) // whitespace after the last call: dropped
					p.pos = j
					return true
				}
				p.trackString(s[i:j])
				if eof {
					p.emitContent(s[start:j])
				} else {
					p.emitContent(s[start:i])
					p.pre = append(p.pre, s[i:j]...)
				}
				p.pos = j
				return true
			}
			k, n, name := candNo, 0, ""
			if s[j] == '<' || s[j] == '{' {
				nl := strings.IndexByte(s[i:j], '\n') >= 0
				k, n, name = p.candidate(s, j, eof, p.lineStart || nl, p.inCode && !nl)
			}
			switch k {
			case candMore:
				p.emitContent(s[start:i])
				p.trackString(s[i:j])
				p.pre = append(p.pre, s[i:j]...)
				p.pos = j
				return true
			case candNo:
				p.trackString(s[i:j])
				p.trackByte(s[j])
				i = j + 1
			default:
				p.emitContent(s[start:i])
				p.begin(k, s[i:j], s, j, n, name)
				return false
			}
		case c == '<' && !p.inCode, c == '{' && p.format == FormatJSON && p.lineStart:
			k, n, name := p.candidate(s, i, eof, p.lineStart, p.inCode)
			switch k {
			case candMore:
				p.emitContent(s[start:i])
				p.pos = i
				return true
			case candNo:
				p.trackByte(c)
				i++
			default:
				p.emitContent(s[start:i])
				p.begin(k, "", s, i, n, name)
				return false
			}
		default:
			p.trackByte(c)
			i++
		}
	}
	p.emitContent(s[start:i])
	p.pos = i
	return true
}

type candKind uint8

const (
	candNo     candKind = iota // not a call: the byte is content
	candMore                   // cannot tell yet
	candXML                    // an XML call header: n bytes, function name
	candOpened                 // <tool_call>: n bytes; the body decides
	candJSON                   // an opener-less JSON body starts here
)

// candidate looks at s[j:], which starts with '<' or '{', given the line
// state there, and tells whether a call may start at j.
func (p *Parser) candidate(s string, j int, eof, lineStart, inCode bool) (candKind, int, string) {
	t := s[j:]
	if t[0] == '{' {
		if p.format == FormatJSON && lineStart {
			return candJSON, 0, ""
		}
		return candNo, 0, ""
	}
	if inCode {
		return candNo, 0, ""
	}
	more := false
	switch match(t, tagToolCall) {
	case mFull:
		return candOpened, len(tagToolCall), ""
	case mPartial:
		more = true
	}
	if p.format == FormatXML && lineStart {
		r, n, name := p.funcHeader(t, eof)
		if r != candNo {
			return r, n, name
		}
	}
	if more {
		return p.more(eof), 0, ""
	}
	return candNo, 0, ""
}

// more is the answer when the input ends before a decision: wait for more,
// or at the end of the reply, not a call.
func (p *Parser) more(eof bool) candKind {
	if eof {
		return candNo
	}
	return candMore
}

// funcHeader reads an XML call header at the start of t: <function=NAME>
// followed by a newline, '<' or the end; or <function=NAME and a newline.
func (p *Parser) funcHeader(t string, eof bool) (candKind, int, string) {
	if idx, partial := matchAny(t, funcOpeners); partial {
		return p.more(eof), 0, ""
	} else if idx < 0 {
		return candNo, 0, ""
	}
	h, n, ok := header(t[len(tagFunction):])
	if !ok {
		if n < maxHeader {
			return p.more(eof), 0, ""
		}
		return candNo, 0, ""
	}
	name := headerName(h)
	if name == "" || !p.tools.declared(name) {
		return candNo, 0, ""
	}
	n += len(tagFunction)
	if t[n-1] == '\n' {
		return candXML, n, name
	}
	m := n
	for m < len(t) && (t[m] == ' ' || t[m] == '\t') {
		m++
	}
	switch {
	case m == len(t):
		if eof {
			return candXML, m, name
		}
		return candMore, 0, ""
	case t[m] == '\n':
		return candXML, m + 1, name
	case t[m] == '<':
		return candXML, m, name
	}
	return candNo, 0, ""
}

// header finds the end of an opener's attribute text h in t (which follows
// "<function" or "<parameter"): the first '>' or newline within maxHeader
// bytes. n is the length including the terminator; when not found, ok is
// false and n is how much was searched.
func header(t string) (h string, n int, ok bool) {
	lim := t
	if len(lim) > maxHeader {
		lim = lim[:maxHeader]
	}
	e := strings.IndexAny(lim, ">\n")
	if e < 0 {
		return "", len(lim), false
	}
	return t[:e], e + 1, true
}

// headerName extracts the name from an opener's text: "=NAME", "=\"NAME\"",
// " name=\"NAME\"" or " NAME".
func headerName(h string) string {
	h = strings.TrimSpace(h)
	if strings.HasPrefix(h, "=") {
		h = strings.TrimSpace(h[1:])
	} else if rest, ok := strings.CutPrefix(h, "name"); ok {
		if rest = strings.TrimSpace(rest); strings.HasPrefix(rest, "=") {
			h = strings.TrimSpace(rest[1:])
		}
	}
	h = strings.TrimSuffix(h, "/")
	if len(h) >= 2 && (h[0] == '"' || h[0] == '\'') && h[len(h)-1] == h[0] {
		h = h[1 : len(h)-1]
	}
	return strings.TrimSpace(h)
}

// begin starts what candidate found at j. ws is the whitespace before it:
// dropped for an XML call, kept aside while a candidate may still be text.
func (p *Parser) begin(k candKind, ws string, s string, j, n int, name string) {
	p.pos = j + n
	switch k {
	case candXML:
		p.startCall(name)
		p.st = stBody
	case candOpened:
		p.preWS = ws
		p.gap = p.gap[:0]
		p.st = stOpened
	case candJSON:
		p.preWS = ws
		p.startJSON("", false)
	}
}

// opened reads what follows <tool_call>: whitespace, then '{' (a JSON body)
// or an XML header. Anything else makes the opener text.
func (p *Parser) opened(eof bool) bool {
	s, i := p.in, p.pos
	j := skipSpace(s, i)
	p.gap = append(p.gap, s[i:j]...)
	p.pos = j
	if j == len(s) {
		if !eof {
			return true
		}
		p.failOpened()
		return false
	}
	if s[j] == '{' {
		jpre := tagToolCall + string(p.gap)
		p.gap = p.gap[:0]
		p.startJSON(jpre, true)
		return false
	}
	k, n, name := p.funcHeader(s[j:], eof)
	switch k {
	case candMore:
		return true
	case candXML:
		p.gap = p.gap[:0]
		p.preWS = ""
		p.startCall(name)
		p.st = stBody
		p.pos = j + n
		return false
	}
	p.failOpened()
	return false
}

// failOpened makes a <tool_call> that no body follows text: its whitespace
// before and its '<' are content, the rest is read again.
func (p *Parser) failOpened() {
	p.trackString(p.preWS)
	p.emitContent(p.preWS)
	p.trackByte('<')
	p.emitContent(tagToolCall[:1])
	text := tagToolCall[1:] + string(p.gap)
	p.preWS = ""
	p.gap = p.gap[:0]
	p.st = stContent
	p.replay(text)
}

// ---- Markdown tracking ----

// trackByte updates the line, fence and inline-code state for one content
// byte. Whitespace does not end the afterCall period; anything else does.
func (p *Parser) trackByte(c byte) {
	if p.fence != 0 {
		p.trackFence(c)
		return
	}
	if p.runLen > 0 {
		if c == p.runChar {
			p.runLen++
			return
		}
		p.endRun()
		if p.fence != 0 {
			p.trackFence(c)
			return
		}
	}
	switch c {
	case '\n':
		p.lineStart, p.inCode = true, false
	case ' ', '\t', '\r':
	case '`', '~':
		p.runChar, p.runLen, p.runAtLS = c, 1, p.lineStart
		p.lineStart, p.afterCall = false, false
	default:
		p.lineStart, p.afterCall = false, false
	}
}

func (p *Parser) trackString(s string) {
	for i := 0; i < len(s); i++ {
		p.trackByte(s[i])
	}
}

// endRun closes a run of backticks or tildes: three or more at a line start
// open a fence; a backtick run elsewhere toggles inline code.
func (p *Parser) endRun() {
	if p.runAtLS && p.runLen >= 3 {
		p.fence, p.fenceLen, p.fline = p.runChar, p.runLen, flOther
	} else if p.runChar == '`' {
		p.inCode = !p.inCode
	}
	p.runLen = 0
}

// fenceCloses reports whether the current line inside a fence is a closing
// fence line, so that the newline ending it ends the fence.
func (p *Parser) fenceCloses() bool {
	return (p.fline == flRun && p.fcount >= p.fenceLen) || p.fline == flAfter
}

// trackFence follows a fenced block, watching for its closing line: only
// spaces, at least fenceLen fence characters, only spaces.
func (p *Parser) trackFence(c byte) {
	switch c {
	case '\n':
		if p.fenceCloses() {
			p.fence = 0
			p.lineStart, p.inCode = true, false
		}
		p.fline, p.fcount = flStart, 0
	case ' ', '\t', '\r':
		if p.fline == flRun {
			if p.fcount >= p.fenceLen {
				p.fline = flAfter
			} else {
				p.fline = flOther
			}
		}
	case p.fence:
		switch p.fline {
		case flStart:
			p.fline, p.fcount = flRun, 1
		case flRun:
			p.fcount++
		default:
			p.fline = flOther
		}
	default:
		p.fline = flOther
	}
}
