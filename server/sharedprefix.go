package server

import (
	"strings"

	"github.com/tidwall/gjson"

	"github.com/infernix/infernix/engine/chat"
	"github.com/infernix/infernix/engine/prefix"
)

// sharedSentinel stands in for the conversation after the leading system
// messages when the server renders the system/tools block alone: templates
// such as Qwen3.5's refuse messages without a user query, so the block is
// rendered with one user message and cut where its content begins. Letters
// only: templates trim and escape content, and this must survive both.
const sharedSentinel = "InfernixSharedPrefixSentinel7f3a9c"

// sharedPrefix returns how many leading tokens of prompt (req rendered with
// budget) are the system prompt and tools, what conversations with the same
// system prompt and tools share, so that hybrid models keep a state snapshot
// there (sched.Request.SharedPrefix). It renders the template once more,
// with only the leading system messages, the tools and a sentinel user
// message, and tokenizes the text before the sentinel. The count is used
// only when those tokens are a prefix of prompt, allowing the last one to
// differ (a BPE merge with the text that follows it); a template that
// renders the system block differently once other messages follow gives 0,
// as do no system message and no tools.
func (s *Server) sharedPrefix(req *chatRequest, budget int, prompt []int32) int {
	tools, kwargs := templateArgs(req, budget)
	msgs := make([]byte, 0, len(req.messages)+len(sharedSentinel)+40)
	msgs = append(msgs, '[')
	gjson.ParseBytes(req.messages).ForEach(func(_, m gjson.Result) bool {
		if m.Get("role").Str != "system" { // normalizeMessages made developer system
			return false
		}
		msgs = append(append(msgs, m.Raw...), ',')
		return true
	})
	if len(msgs) == 1 && len(tools) == 0 {
		return 0
	}
	msgs = append(msgs, `{"role":"user","content":"`+sharedSentinel+`"}]`...)
	out, err := s.eng.Template.Render(chat.Request{Messages: msgs, Tools: tools, Kwargs: kwargs,
		BOSToken: s.eng.BOS(), EOSToken: s.eng.EOS()})
	if err != nil {
		return 0
	}
	cut := strings.Index(out, sharedSentinel)
	// Each token covers at least a byte: a shorter text holds no full block.
	if cut < prefix.BlockSize {
		return 0
	}
	ids := s.eng.Tokenizer.Encode(out[:cut])
	n := 0
	for n < len(ids) && n < len(prompt) && ids[n] == prompt[n] {
		n++
	}
	if n < len(ids)-1 {
		return 0
	}
	return n
}
