package toolcall

// bodyTags are what may follow inside <function=…> between parameters.
var bodyTags = []string{"<parameter=", "<parameter ", tagFunctionEnd, tagToolCallEnd, tagToolCall, "<function=", "<function "}

const (
	btParam    = 0
	btParam2   = 1
	btFuncEnd  = 2
	btCallEnd  = 3
	btNextCall = 4 // and the ones after: another call starts
)

// body reads between parameters: whitespace, then a parameter opener or a
// closing tag. Anything else ends the call and is left for the content state.
func (p *Parser) body(eof bool) bool {
	s, i := p.in, p.pos
	j := skipSpace(s, i)
	p.gap = append(p.gap, s[i:j]...)
	p.pos = j
	if j == len(s) {
		if !eof {
			return true
		}
		p.endCall()
		return false
	}
	t := s[j:]
	idx, partial := matchAny(t, bodyTags)
	switch {
	case idx == btParam || idx == btParam2:
		h, n, ok := header(t[len(tagParameter):])
		if !ok {
			if n < maxHeader && !eof {
				return true
			}
			p.endCall() // a broken opener: stray text
			return false
		}
		p.gap = p.gap[:0]
		p.beginParam(headerName(h))
		p.pos = j + len(tagParameter) + n
		if t[len(tagParameter)+n-1] == '>' {
			p.st = stValueStart
		} else {
			p.st = stValue // the newline that ended the opener was the value's first
		}
	case idx == btFuncEnd:
		p.gap = p.gap[:0]
		p.pos = j + len(tagFunctionEnd)
		p.st = stAfterFunc
	case idx == btCallEnd:
		p.gap = p.gap[:0]
		p.pos = j + len(tagToolCallEnd)
		p.endCall()
	case idx >= btNextCall:
		p.endCall()
	case partial && !eof:
		return true
	default:
		p.endCall()
	}
	return false
}

// afterFunc consumes an optional </tool_call> after </function>.
func (p *Parser) afterFunc(eof bool) bool {
	s, i := p.in, p.pos
	j := skipSpace(s, i)
	p.gap = append(p.gap, s[i:j]...)
	p.pos = j
	if j == len(s) && !eof {
		return true
	}
	switch match(s[j:], tagToolCallEnd) {
	case mFull:
		p.gap = p.gap[:0]
		p.pos = j + len(tagToolCallEnd)
	case mPartial:
		if !eof {
			return true
		}
	}
	p.endCall()
	return false
}

// beginParam writes the argument text before a parameter's value.
func (p *Parser) beginParam(name string) {
	p.kinds = p.tools.kinds(p.fn, name)
	p.buffered = typed(p.kinds)
	p.value = p.value[:0]
	p.flushContent()
	if p.argsOpen {
		p.abuf = append(p.abuf, ',')
	} else {
		p.abuf = append(p.abuf, '{')
		p.argsOpen = true
	}
	p.abuf = appendString(p.abuf, name)
	p.abuf = append(p.abuf, ':')
	if !p.buffered {
		p.abuf = append(p.abuf, '"')
	}
}

// valueText adds raw value text: streamed as escaped JSON string text, or
// collected when the value will be converted.
func (p *Parser) valueText(s string) {
	if s == "" {
		return
	}
	if p.buffered {
		p.value = append(p.value, s...)
		return
	}
	p.flushContent()
	p.abuf = appendEscaped(p.abuf, s)
}

func (p *Parser) endValue() {
	if p.buffered {
		p.abuf = appendValue(p.abuf, string(p.value), p.kinds)
		p.value = p.value[:0]
	} else {
		p.abuf = append(p.abuf, '"')
	}
}

// valueStart drops the newline the template puts after a parameter opener.
func (p *Parser) valueStart(eof bool) bool {
	if p.pos == len(p.in) {
		if !eof {
			return true
		}
	} else if p.in[p.pos] == '\n' {
		p.pos++
	}
	p.st = stValue
	return false
}

// Closing tags that can end a value, and what must follow each of them for
// it to count as the end (besides the end of the reply).
var (
	enderTags = []string{tagParameterEnd, tagFunctionEnd, tagToolCallEnd}
	enderNext = [][]string{
		{"<parameter=", "<parameter ", tagFunctionEnd, tagToolCallEnd, tagToolCall, "<function=", "<function "},
		{tagToolCallEnd, tagToolCall, "<function=", "<function "},
		{tagToolCall, "<function=", "<function "},
	}
)

// valueRun reads a parameter value up to a closing tag. A newline right
// before the tag is held back: it is dropped if the tag ends the value.
func (p *Parser) valueRun(eof bool) bool {
	s, i := p.in, p.pos
	start := i
	for i < len(s) {
		c := s[i]
		if c != '\n' && c != '<' {
			i++
			continue
		}
		k := i
		if c == '\n' {
			k++
			if k == len(s) {
				if !eof {
					break // this newline may be the one before the closing tag
				}
				p.valueText(s[start:i]) // the value's trailing newline
				p.pos = k
				p.endValue()
				p.st = stBody
				return false
			}
			if s[k] != '<' {
				i = k
				continue
			}
		}
		e, r := -1, mNo
		for x, tag := range enderTags {
			if r = match(s[k:], tag); r != mNo {
				e = x
				break
			}
		}
		switch {
		case r == mPartial && !eof:
			p.valueText(s[start:i])
			p.pos = i
			return true
		case r == mFull:
			p.valueText(s[start:i])
			p.ender, p.enderNL = e, c == '\n'
			p.gap = p.gap[:0]
			p.pos = k + len(enderTags[e])
			p.st = stValueEnd
			return false
		}
		i = k + 1
	}
	p.valueText(s[start:i])
	p.pos = i
	if eof {
		p.endValue()
		p.st = stBody
		return false
	}
	return true
}

// valueEnd decides whether the closing tag just read ends the value: it
// does if structure (or the end) follows it, after whitespace. Otherwise the
// tag, the newline before it and the whitespace after it are value text.
func (p *Parser) valueEnd(eof bool) bool {
	s, i := p.in, p.pos
	j := skipSpace(s, i)
	p.gap = append(p.gap, s[i:j]...)
	p.pos = j
	ends := j == len(s) // at the end of the reply
	if !ends {
		idx, partial := matchAny(s[j:], enderNext[p.ender])
		if idx < 0 && partial && !eof {
			return true
		}
		ends = idx >= 0
	} else if !eof {
		return true
	}
	if !ends {
		if p.enderNL {
			p.valueText("\n")
		}
		p.valueText(enderTags[p.ender])
		p.st = stValue
		if len(p.gap) > 0 {
			// The whitespace is value text too, but read again: a newline at
			// its end may be the one before the closing tag that does end
			// the value, and is then dropped like any other.
			gap := string(p.gap)
			p.gap = p.gap[:0]
			p.replay(gap)
		}
		return false
	}
	p.endValue()
	switch p.ender {
	case 0:
		p.gap = p.gap[:0]
		p.st = stBody
	case 1:
		p.gap = p.gap[:0]
		p.st = stAfterFunc
	default:
		p.endCall()
	}
	return false
}
