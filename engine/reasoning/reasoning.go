// Package reasoning splits a Qwen reply into its reasoning (the text inside
// <think>…</think>) and its content, whole (Split) or streaming (Splitter).
//
// # Rules
//
// The Qwen templates write a reasoning turn as
// "<think>\n" + reasoning + "\n</think>\n\n" + content, and read one back with
// reasoning.strip("\n") and content.lstrip("\n"). The splitter inverts that:
//
//   - Reasoning starts at the start of the output when openInPrompt (the
//     rendered prompt already ends inside <think>, as Qwen3.5 and the Qwen3
//     thinking templates do). Otherwise it starts only if the output begins
//     with the open marker, after optional whitespace (" \t\r\n", which is then
//     dropped). An open marker anywhere later is ordinary content.
//   - Reasoning ends at the first close marker. Text after it is content.
//   - All newlines ('\n' only) at the start and at the end of the reasoning are
//     removed, and all newlines at the start of the content that follows a
//     close marker.
//   - A reply that ends inside the reasoning (a token limit, a thinking budget
//     the engine enforced by stopping) is all reasoning, trailing newlines
//     removed, and has no content.
//   - When not openInPrompt, no open marker begins the output, and nothing but
//     whitespace comes before a close marker (the model dropped the opener and
//     thought nothing), the reasoning is empty and what follows the close
//     marker is content.
//   - Otherwise, without an open marker at the start, everything is content
//     byte for byte, any marker included.
//
// # Dropped openers
//
// vLLM's Qwen3 parser, given a close marker with no open marker, takes the
// text before it as reasoning. A streaming splitter cannot do that without
// holding back all content until the reply ends (the close marker may come
// at any point), which would stop every reply from streaming. Here that case
// is handled where it arises in practice instead: the templates that make
// models omit the opener put it in the prompt, which is what openInPrompt
// (and OpenInPrompt, to compute it) is for. Only the bounded form above
// (nothing but whitespace before the close marker) is recognised without it.
package reasoning

import "strings"

// Markers used by Qwen3 and Qwen3.5.
const (
	OpenMarker  = "<think>"
	CloseMarker = "</think>"
	// ForcedClose is the text an engine appends to end reasoning early (a
	// thinking budget), in the form the templates write after reasoning.
	ForcedClose = "\n" + CloseMarker + "\n\n"
)

// OpenInPrompt reports whether a rendered prompt ends inside an open
// reasoning block: its last non-space text is the open marker.
func OpenInPrompt(prompt, open string) bool {
	return strings.HasSuffix(strings.TrimRight(prompt, " \t\r\n"), open)
}

// Split splits a whole reply with the Qwen markers. It equals what a
// Splitter gives for the same text fed in any pieces.
func Split(text string, openInPrompt bool) (reasoning, content string) {
	return split(text, openInPrompt, OpenMarker, CloseMarker)
}

// split states the rules directly; the tests hold the Splitter to it.
func split(text string, openInPrompt bool, open, close string) (string, string) {
	body := text
	if !openInPrompt {
		t := strings.TrimLeft(text, " \t\r\n")
		switch {
		case strings.HasPrefix(t, open):
			body = t[len(open):]
		case strings.HasPrefix(t, close):
			return "", strings.TrimLeft(t[len(close):], "\n")
		default:
			return "", text
		}
	}
	body = strings.TrimLeft(body, "\n")
	if i := strings.Index(body, close); i >= 0 {
		return strings.TrimRight(body[:i], "\n"), strings.TrimLeft(body[i+len(close):], "\n")
	}
	return strings.TrimRight(body, "\n"), ""
}

type state uint8

const (
	stPrelude   state = iota // not openInPrompt, nothing but whitespace yet
	stThinkHead              // reasoning started: dropping its leading newlines
	stThink                  // inside reasoning
	stBodyHead               // after the close marker: dropping leading newlines
	stBody                   // content to the end
)

// Splitter splits a streamed reply. It holds back only what may still
// change meaning: leading whitespace that may precede an open marker, a
// partial marker, and newlines at the end of the reasoning so far (removed if
// the close marker follows them). A Splitter is not safe for concurrent use.
type Splitter struct {
	open, close string
	st          state
	held        string // a partial marker
	ws          []byte // prelude whitespace held
	nl          int    // newlines held at the end of the reasoning so far
}

// NewSplitter returns a splitter; open and close are the markers (normally
// OpenMarker and CloseMarker) and must be non-empty and differ.
func NewSplitter(openInPrompt bool, open, close string) *Splitter {
	if open == "" || close == "" || open == close {
		panic("reasoning: markers must be non-empty and differ")
	}
	s := &Splitter{open: open, close: close}
	if openInPrompt {
		s.st = stThinkHead
	}
	return s
}

// InReasoning reports whether the text so far ends inside the reasoning
// (after an open marker, or from the start when openInPrompt, and before
// the close marker). An engine can use it to enforce a thinking budget.
func (s *Splitter) InReasoning() bool { return s.st == stThinkHead || s.st == stThink }

// Feed takes the next piece of decoded text and returns the reasoning and
// content it completes.
func (s *Splitter) Feed(text string) (reasoning, content string) {
	in := text
	if s.held != "" {
		in = s.held + text
		s.held = ""
	}
	return s.run(in, false)
}

// Finish ends the reply and returns what was held back.
func (s *Splitter) Finish() (reasoning, content string) {
	in := s.held
	s.held = ""
	return s.run(in, true)
}

func (s *Splitter) run(in string, eof bool) (reasoning, content string) {
	for {
		switch s.st {
		case stPrelude:
			t := strings.TrimLeft(in, " \t\r\n")
			s.ws = append(s.ws, in[:len(in)-len(t)]...)
			switch {
			case strings.HasPrefix(t, s.open):
				in, s.st = t[len(s.open):], stThinkHead
				s.ws = s.ws[:0]
			case strings.HasPrefix(t, s.close):
				in, s.st = t[len(s.close):], stBodyHead
				s.ws = s.ws[:0]
			case !eof && (strings.HasPrefix(s.open, t) || strings.HasPrefix(s.close, t)):
				s.held = t // maybe a partial marker
				return reasoning, content
			default:
				if len(s.ws) > 0 {
					t = string(s.ws) + t
					s.ws = s.ws[:0]
				}
				in, s.st = t, stBody
			}
		case stThinkHead, stBodyHead:
			in = strings.TrimLeft(in, "\n")
			if in == "" {
				return reasoning, content
			}
			s.st++ // to stThink or stBody
		case stThink:
			if i := strings.Index(in, s.close); i >= 0 {
				reasoning = s.withNewlines(strings.TrimRight(in[:i], "\n"))
				s.nl = 0
				in, s.st = in[i+len(s.close):], stBodyHead
				continue
			}
			if eof {
				reasoning = s.withNewlines(strings.TrimRight(in, "\n"))
				s.nl = 0
				return reasoning, content
			}
			// Hold a possible partial close marker and the newlines before it.
			body := in[:len(in)-partialSuffix(in, s.close)]
			keep := strings.TrimRight(body, "\n")
			reasoning = s.withNewlines(keep)
			if keep != "" {
				s.nl = 0
			}
			s.nl += len(body) - len(keep)
			s.held = in[len(body):]
			return reasoning, content
		case stBody:
			return reasoning, in
		}
	}
}

// withNewlines puts the held newlines back before reasoning text that
// follows them; before no text they stay held (or are dropped at the end).
func (s *Splitter) withNewlines(text string) string {
	if text == "" || s.nl == 0 {
		return text
	}
	return strings.Repeat("\n", s.nl) + text
}

// partialSuffix returns the length of the longest proper prefix of marker
// that s ends with.
func partialSuffix(s, marker string) int {
	for k := min(len(marker)-1, len(s)); k > 0; k-- {
		if s[len(s)-k:] == marker[:k] {
			return k
		}
	}
	return 0
}
