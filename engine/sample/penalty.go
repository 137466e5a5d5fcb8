package sample

// penalties holds what the repetition, presence and frequency penalties
// need to know about one sequence. Its cost per Sample is proportional to
// the number of distinct tokens seen, not to the vocabulary.
type penalties struct {
	rep                 float32 // repetition penalty; 1 = off
	presence, frequency float32 // 0 = off

	// Repetition: distinct tokens of prompt and output, and a bitset over
	// the vocabulary for membership.
	seen   []uint64
	repIDs []int32

	// Presence/frequency: distinct generated tokens with their counts;
	// slot maps a token id to its index in genIDs.
	genIDs    []int32
	genCounts []int32
	slot      map[int32]int32
}

func newPenalties(p Params, vocab int, prompt []int32) penalties {
	pen := penalties{rep: p.RepetitionPenalty, presence: p.PresencePenalty, frequency: p.FrequencyPenalty}
	if !(pen.rep > 0) { // 0 or negative would flip or zero logits: treat as off
		pen.rep = 1
	}
	if pen.rep != 1 {
		pen.seen = make([]uint64, (vocab+63)/64)
		pen.repIDs = make([]int32, 0, len(prompt)+256)
		for _, t := range prompt {
			pen.markSeen(t, vocab)
		}
	}
	if pen.presence != 0 || pen.frequency != 0 {
		pen.genIDs = make([]int32, 0, 256)
		pen.genCounts = make([]int32, 0, 256)
		pen.slot = make(map[int32]int32, 256)
	}
	return pen
}

func (pen *penalties) active() bool {
	return pen.rep != 1 || pen.presence != 0 || pen.frequency != 0
}

func (pen *penalties) markSeen(t int32, vocab int) {
	if t < 0 || int(t) >= vocab {
		return
	}
	w, b := t>>6, uint64(1)<<(t&63)
	if pen.seen[w]&b == 0 {
		pen.seen[w] |= b
		pen.repIDs = append(pen.repIDs, t)
	}
}

// accept records one generated token. Growth of the slices and the map is
// amortised; a token seen before costs no allocation.
func (pen *penalties) accept(t int32, vocab int) {
	if t < 0 || int(t) >= vocab {
		return
	}
	if pen.rep != 1 {
		pen.markSeen(t, vocab)
	}
	if pen.slot != nil {
		if i, ok := pen.slot[t]; ok {
			pen.genCounts[i]++
		} else {
			pen.slot[t] = int32(len(pen.genIDs))
			pen.genIDs = append(pen.genIDs, t)
			pen.genCounts = append(pen.genCounts, 1)
		}
	}
}

// apply penalises logits in place: repetition first, then frequency and
// presence, the order vLLM uses.
func (pen *penalties) apply(logits []float32) {
	if r := pen.rep; r != 1 {
		for _, t := range pen.repIDs {
			if l := logits[t]; l > 0 {
				logits[t] = l / r
			} else {
				logits[t] = l * r
			}
		}
	}
	for i, t := range pen.genIDs {
		// Two subtractions, as vLLM does, so results match it bit for bit.
		l := logits[t] - pen.frequency*float32(pen.genCounts[i])
		logits[t] = l - pen.presence
	}
}
