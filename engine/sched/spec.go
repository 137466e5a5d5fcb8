package sched

import (
	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/kv"
)

// Speculative decoding by prompt lookup (Config.SpecTokens): a decode lane
// whose last tokens occurred earlier in its sequence proposes the tokens
// that followed them, and one forward computes the lane's next token and
// each proposed one. Row j's logits are sampled exactly as a plain step
// would sample the lane's next token (the same request, the same draw from
// the lane's generator); the draft after it is kept only if the sampled
// token equals it, so the output is token for token what decoding one token
// a step produces, with up to SpecTokens+1 tokens a forward where the text
// repeats (code edits, quotes, tool arguments copied from the context).
//
// A lane speculates only where that equivalence is cheap to keep: no
// recurrent state (hybrid models cannot take back rejected tokens), no
// constraint (its masks follow each token), no forced tokens pending. Its
// rows are sampled on the device with the forward where the model can and
// the draw ignores the tokens before it (greedy, no penalties); on the host
// otherwise.

// specNgram is the longest run of last tokens looked up; shorter ones are
// tried when it does not occur.
const specNgram = 3

// specWindow bounds how far back the lookup searches.
const specWindow = 16384

// draft returns the tokens l proposes after its last one (nil: none), at
// most room of them, as many as its events channel and its KV blocks (or
// free ones, taken now: drafts preempt no one) hold.
func (s *Scheduler) draft(l *lane, room int) []int32 {
	k := min(s.cfg.SpecTokens, room, l.req.MaxTokens-l.gen-1, s.cfg.MaxContext-len(l.tokens)-1, cap(l.events)-len(l.events)-3)
	if k <= 0 || l.slot >= 0 || l.req.Constraint != nil || len(l.forced) > 0 || l.req.MaxTokens == 0 {
		return nil
	}
	toks := l.tokens
	lo := max(0, len(toks)-specWindow)
	for n := min(specNgram, len(toks)-1); n >= 1; n-- {
		tail := toks[len(toks)-n:]
		for i := len(toks) - n - 1; i >= lo; i-- {
			if toks[i] != tail[0] || !equalTokens(toks[i:i+n], tail) {
				continue
			}
			end := min(i+n+k, len(toks))
			return toks[i+n : i+n+s.specBlocks(l, end-i-n)]
		}
	}
	return nil
}

// specBlocks returns how many of k drafts l's KV blocks can take after
// its last token, allocating free blocks for them if needed.
func (s *Scheduler) specBlocks(l *lane, k int) int {
	have := len(l.blocks)*backend.BlockSize - l.computed - 1
	if k <= have {
		return k
	}
	if blocks, ok := s.alloc.Alloc(l.blocks, kv.BlocksFor(l.computed+1+k)-len(l.blocks)); ok {
		l.blocks = blocks
		return k
	}
	return max(have, 0)
}

func equalTokens(a, b []int32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// emitSpec samples a speculating lane's rows (first: its row for the token
// after its last; then one row per draft token), emitting tokens while each
// equals the draft it was computed for, and advances l.computed over the
// drafts kept. With device, the rows were sampled with the forward
// (planSampling allows that only for a draw that ignores the tokens
// before it: greedy, no penalties).
func (s *Scheduler) emitSpec(l *lane, first int, drafts []int32, device bool) {
	for j := 0; ; j++ {
		row := first + j
		res := &s.hres[0]
		if device {
			res = &s.sres[row]
		} else {
			s.hreq[0] = s.request(l)
			backend.SampleHost(s.logits[row*s.vocab:(row+1)*s.vocab], s.vocab, s.hreq[:], s.hres[:])
		}
		hit := j < len(drafts) && res.Token == drafts[j]
		s.emit(l, res)
		s.specRows.Add(1)
		if !l.running || !hit || len(l.forced) > 0 {
			return
		}
		// The token is the draft whose KV this step computed.
		l.computed++
		s.specKept.Add(1)
		s.register(l)
	}
}
