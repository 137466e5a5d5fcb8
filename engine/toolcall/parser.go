package toolcall

// EventKind tells what an Event carries.
type EventKind uint8

const (
	// Content is reply text outside calls (Text).
	Content EventKind = iota
	// CallStart opens call Index (0, 1, …) for function Name.
	CallStart
	// CallArgs carries the next piece of call Index's arguments JSON text.
	CallArgs
	// CallEnd closes call Index; its arguments are complete.
	CallEnd
)

func (k EventKind) String() string {
	switch k {
	case Content:
		return "content"
	case CallStart:
		return "call_start"
	case CallArgs:
		return "call_args"
	case CallEnd:
		return "call_end"
	}
	return "unknown"
}

// Event is one streamed delta, shaped after OpenAI's streaming deltas.
type Event struct {
	Kind      EventKind
	Text      string // Content
	Index     int    // CallStart, CallArgs, CallEnd
	Name      string // CallStart
	ArgsDelta string // CallArgs
}

// Parser splits a streamed reply into content and calls as it arrives.
//
// Every call's events come in the order CallStart, CallArgs…, CallEnd, with
// no content in between, and calls are numbered from 0 in order. Within one
// Feed, adjacent content is merged into one event and so are a call's
// adjacent argument pieces.
//
// Text is held back only while it may still belong to a call: a partial tag,
// a JSON call body until it is complete, a run of whitespace until the next
// non-space byte shows whether a call follows, and the end of an XML value
// until it is clear whether a closing tag ends it. Decisions depend on the
// text only, never on how it was cut into pieces, so the concatenated output
// is the same for any chunking and equals Parse.
//
// A Parser is not safe for concurrent use.
type Parser struct {
	format Format
	tools  toolSet

	held     string   // input not yet decided, kept for the next Feed
	in       string   // input being processed
	pos      int      // next byte of in
	stack    []string // input to process after in (pushed by a replay), last first
	st       pstate
	finished bool

	// Markdown tracking of the content, to leave fenced calls as text.
	lineStart bool // only spaces/tabs since the last newline (or a call)
	inCode    bool // inside an inline code span
	afterCall bool // no content byte other than whitespace since the last call
	runChar   byte // '`' or '~' run being counted, when runLen > 0
	runLen    int
	runAtLS   bool // the run started at the start of a line
	fence     byte // fence character while inside a fence, else 0
	fenceLen  int
	fline     fenceLine
	fcount    int

	// Whitespace consumed but not yet given a place. pre: content whitespace
	// (already tracked) that is dropped if a call follows. gap: whitespace a
	// call state skipped, dropped or handed back when the call ends.
	pre []byte
	gap []byte

	// The call being read.
	index    int
	fn       string
	argsOpen bool   // the arguments' '{' has been written
	kinds    []kind // types of the parameter being read
	buffered bool   // its value is collected for conversion, not streamed
	value    []byte // the collected value
	ender    int    // closing tag (enderTags index) whose follower is awaited
	enderNL  bool   // a newline came right before that closing tag

	// A candidate that may still turn out to be text.
	preWS    string // content whitespace before it
	jpre     string // its text before the JSON body ("<tool_call>" and spaces)
	jopener  bool   // JSON body: had a <tool_call> opener
	jbuf     []byte // JSON body so far
	keyCheck bool   // opener-less JSON body: "name" must be the first key
	js       jscan

	// Output of the current Feed.
	events []Event
	cpend  string // content not yet written as an event (zero-copy case)
	cbuf   []byte // content not yet written, when it came in several pieces
	abuf   []byte // argument text not yet written as an event
}

type pstate uint8

const (
	stContent    pstate = iota
	stOpened            // after <tool_call>: a JSON or XML body must follow
	stBody              // inside <function=…>, between parameters
	stValueStart        // right after a parameter opener's '>'
	stValue             // inside a parameter value
	stValueEnd          // after a closing tag in a value: does structure follow?
	stAfterFunc         // after </function>, before an optional </tool_call>
	stJSON              // inside a JSON call body
	stJSONAfter         // after a JSON call body, before </tool_call>
)

type fenceLine uint8

const (
	flStart fenceLine = iota // only spaces so far on this line
	flRun                    // counting fence characters
	flAfter                  // a long enough run, then only spaces
	flOther                  // not a closing fence line
)

// maxHeader bounds the text of a <function=…> or <parameter=…> opener, so a
// stray "<function=" is given up quickly.
const maxHeader = 256

// maxJSONCall bounds a buffered JSON call body; a longer one stays text.
const maxJSONCall = 4 << 20

// NewParser returns a parser for replies in format f. tools limits the
// accepted function names when non-empty and gives the parameter types.
func NewParser(f Format, tools []Tool) *Parser {
	return &Parser{format: f, tools: newToolSet(tools), lineStart: true}
}

// Feed takes the next piece of decoded text and returns the events it
// completes. The returned slice is reused by the next Feed or Finish.
// Feed must not be called after Finish.
func (p *Parser) Feed(chunk string) []Event {
	if p.finished {
		panic("toolcall: Feed after Finish")
	}
	p.events = p.events[:0]
	if p.held == "" {
		p.in = chunk
	} else {
		p.in = p.held + chunk
	}
	p.pos = 0
	p.run(false)
	p.held = p.in[p.pos:]
	p.in = ""
	p.flush()
	return p.events
}

// Finish ends the reply: everything held back is decided, an open XML call
// is closed with what it has, and an unfinished JSON body becomes content.
func (p *Parser) Finish() []Event {
	if p.finished {
		return p.events[:0]
	}
	p.finished = true
	p.events = p.events[:0]
	p.in, p.pos, p.held = p.held, 0, ""
	p.run(true)
	p.in = ""
	p.flush()
	return p.events
}

// pullLimit bounds how much stacked input is joined to a held lookahead at a
// time, so that a replay never copies the whole rest of the input.
const pullLimit = 1024

// run processes p.in from p.pos until more input is needed or, at the end of
// the reply (eof), until everything is decided. Each step either consumes
// input or moves to a state that will; a step that needs more input than p.in
// has gets the next piece of stacked input joined on.
func (p *Parser) run(eof bool) {
	for {
		atEOF := eof && len(p.stack) == 0
		var wait bool
		switch p.st {
		case stContent:
			wait = p.content(atEOF)
		case stOpened:
			wait = p.opened(atEOF)
		case stBody:
			wait = p.body(atEOF)
		case stValueStart:
			wait = p.valueStart(atEOF)
		case stValue:
			wait = p.valueRun(atEOF)
		case stValueEnd:
			wait = p.valueEnd(atEOF)
		case stAfterFunc:
			wait = p.afterFunc(atEOF)
		case stJSON:
			wait = p.jsonBody(atEOF)
		case stJSONAfter:
			wait = p.jsonAfter(atEOF)
		}
		if !wait {
			continue
		}
		if len(p.stack) == 0 {
			return
		}
		next := p.stack[len(p.stack)-1]
		p.stack = p.stack[:len(p.stack)-1]
		if p.pos < len(p.in) && len(next) > pullLimit {
			p.stack = append(p.stack, next[pullLimit:])
			next = next[:pullLimit]
		}
		if p.pos < len(p.in) {
			next = p.in[p.pos:] + next
		}
		p.in, p.pos = next, 0
	}
}

// replay makes text the next input, ahead of what was not consumed yet.
func (p *Parser) replay(text string) {
	if rest := p.in[p.pos:]; rest != "" {
		p.stack = append(p.stack, rest)
	}
	p.in, p.pos = text, 0
}

// ---- output ----

func (p *Parser) emitContent(s string) {
	if s == "" {
		return
	}
	p.flushArgs()
	if p.cpend == "" && len(p.cbuf) == 0 {
		p.cpend = s
		return
	}
	if p.cpend != "" {
		p.cbuf = append(p.cbuf, p.cpend...)
		p.cpend = ""
	}
	p.cbuf = append(p.cbuf, s...)
}

func (p *Parser) flushContent() {
	switch {
	case p.cpend != "":
		p.events = append(p.events, Event{Kind: Content, Text: p.cpend})
		p.cpend = ""
	case len(p.cbuf) > 0:
		p.events = append(p.events, Event{Kind: Content, Text: string(p.cbuf)})
		p.cbuf = p.cbuf[:0]
	}
}

func (p *Parser) flushArgs() {
	if len(p.abuf) > 0 {
		p.events = append(p.events, Event{Kind: CallArgs, Index: p.index, ArgsDelta: string(p.abuf)})
		p.abuf = p.abuf[:0]
	}
}

func (p *Parser) flush() {
	p.flushContent()
	p.flushArgs()
}

func (p *Parser) args(s string) {
	p.flushContent()
	p.abuf = append(p.abuf, s...)
}

func (p *Parser) startCall(name string) {
	p.flush()
	p.events = append(p.events, Event{Kind: CallStart, Index: p.index, Name: name})
	p.fn = name
	p.argsOpen = false
}

// endCall closes the current call and returns to content. The whitespace
// and text after it are left to the content state.
func (p *Parser) endCall() {
	if p.argsOpen {
		p.args("}")
	} else {
		p.args("{}")
	}
	p.flushArgs()
	p.events = append(p.events, Event{Kind: CallEnd, Index: p.index})
	p.index++
	p.toContent()
}

// toContent returns to content after a call. Whitespace the call state had
// skipped goes back to the content state, which drops it if another call or
// the end follows.
func (p *Parser) toContent() {
	p.st = stContent
	p.afterCall, p.lineStart, p.inCode, p.runLen = true, true, false, 0
	p.pre = append(p.pre[:0], p.gap...)
	p.gap = p.gap[:0]
}

// ---- helpers ----

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// match compares the start of s with tag: full when s begins with tag,
// partial when s is a proper prefix of tag (more input could complete it).
type matchResult uint8

const (
	mNo matchResult = iota
	mPartial
	mFull
)

func match(s, tag string) matchResult {
	if len(s) >= len(tag) {
		if s[:len(tag)] == tag {
			return mFull
		}
		return mNo
	}
	if tag[:len(s)] == s {
		return mPartial
	}
	return mNo
}

// matchAny returns the index of the tag s begins with, or -1 and whether
// some tag could still match with more input.
func matchAny(s string, tags []string) (int, bool) {
	partial := false
	for i, t := range tags {
		switch match(s, t) {
		case mFull:
			return i, false
		case mPartial:
			partial = true
		}
	}
	return -1, partial
}
