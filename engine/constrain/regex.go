package constrain

import (
	"fmt"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
)

// A string's "pattern", as JSON Schema means it: an ECMA-262-style regular
// expression that matches somewhere in the string (anchor it with ^ and $
// to match the whole). It runs on the string's decoded runes as a lazily
// built DFA: a state is the set of the compiled program's threads, interned
// so that configurations compare and cache by pointer and id.

// maxRegexStates bounds a pattern's DFA; past it the string cannot grow
// (a pattern that needs more states than this is not one a model fills).
const maxRegexStates = 1 << 16

type regex struct {
	prog   *syntax.Prog
	live   []bool // a thread at pc may still reach a match past the text's first position
	mu     sync.Mutex
	states map[string]*rxState
	start  *rxState
	n      int32
}

// rxState is a DFA state: threads waiting at rune instructions or at
// empty-width assertions that depend on what comes next.
type rxState struct {
	re    *regex
	id    int32
	pcs   []uint32
	left  syntax.EmptyOp // the assertions true here from what came before (the beginning of text, of a line)
	final bool           // the string may end here (an end-of-text closure reaches a match)
	dead  bool           // no thread left
	ascii [128]atomic.Pointer[rxState]
	other map[rune]*rxState // under re.mu
	// The runes other than a newline after which the state is not dead, as
	// sorted, disjoint ranges (built on first use by admits).
	viable atomic.Pointer[[]runeRange]
}

// compileRegex compiles a pattern for search (not anchored unless it says
// so); full: the whole text must match.
func compileRegex(pattern string, full bool) (*regex, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %v", pattern, err)
	}
	if hasWordBoundary(re) {
		return nil, fmt.Errorf("pattern %q: word boundaries (\\b, \\B) are not supported", pattern)
	}
	around := &syntax.Regexp{Op: syntax.OpStar, Sub: []*syntax.Regexp{{Op: syntax.OpAnyChar}}}
	end := around
	if full {
		around, end = &syntax.Regexp{Op: syntax.OpBeginText}, &syntax.Regexp{Op: syntax.OpEndText}
	}
	whole := &syntax.Regexp{Op: syntax.OpConcat, Sub: []*syntax.Regexp{around, re.Simplify(), end}}
	prog, err := syntax.Compile(whole)
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %v", pattern, err)
	}
	r := &regex{prog: prog, states: map[string]*rxState{}, live: liveness(prog)}
	begin := syntax.EmptyBeginText | syntax.EmptyBeginLine
	r.start = r.intern(r.closure(nil, []uint32{uint32(prog.Start)}, begin), begin)
	return r, nil
}

func hasWordBoundary(re *syntax.Regexp) bool {
	if re.Op == syntax.OpWordBoundary || re.Op == syntax.OpNoWordBoundary {
		return true
	}
	return slices.ContainsFunc(re.Sub, hasWordBoundary)
}

// closure follows pcs through the instructions that consume nothing, with
// the assertions in flags true; assertions that flags leave undecided
// (the end of text or line, which depends on what follows) stay threads.
func (r *regex) closure(dst, pcs []uint32, flags syntax.EmptyOp) []uint32 {
	seen := map[uint32]bool{}
	var visit func(pc uint32)
	visit = func(pc uint32) {
		if seen[pc] {
			return
		}
		seen[pc] = true
		in := &r.prog.Inst[pc]
		switch in.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			visit(in.Out)
			visit(in.Arg)
		case syntax.InstCapture, syntax.InstNop:
			visit(in.Out)
		case syntax.InstEmptyWidth:
			op := syntax.EmptyOp(in.Arg)
			if op&^flags == 0 {
				visit(in.Out)
			} else if op&^(flags|syntax.EmptyEndText|syntax.EmptyEndLine) == 0 {
				dst = append(dst, pc) // decided by the next rune, or the end
			}
		case syntax.InstFail:
		default: // InstMatch and the rune instructions
			dst = append(dst, pc)
		}
	}
	for _, pc := range pcs {
		visit(pc)
	}
	slices.Sort(dst)
	return slices.Compact(dst)
}

// liveness finds the instructions from which a match is reachable later in
// the text: not through the beginning of text (passed once the first rune
// is read), and past the end of text through no rune. Threads elsewhere
// are dropped, so that a state with no chance of a match is dead at once
// (an anchored pattern after a wrong first rune) instead of letting the
// string grow that can never close.
func liveness(p *syntax.Prog) []bool {
	n := len(p.Inst)
	live, end := make([]bool, n), make([]bool, n) // end: reachable consuming nothing
	for changed := true; changed; {
		changed = false
		for pc := range p.Inst {
			in := &p.Inst[pc]
			var l, e bool
			switch in.Op {
			case syntax.InstMatch:
				l, e = true, true
			case syntax.InstAlt, syntax.InstAltMatch:
				l, e = live[in.Out] || live[in.Arg], end[in.Out] || end[in.Arg]
			case syntax.InstCapture, syntax.InstNop:
				l, e = live[in.Out], end[in.Out]
			case syntax.InstEmptyWidth:
				op := syntax.EmptyOp(in.Arg)
				switch {
				case op&syntax.EmptyBeginText != 0:
				case op&syntax.EmptyEndText != 0:
					l, e = end[in.Out], end[in.Out]
				default:
					l, e = live[in.Out], end[in.Out]
				}
			case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
				l = live[in.Out]
			}
			if l && !live[pc] || e && !end[pc] {
				live[pc], end[pc], changed = live[pc] || l, end[pc] || e, true
			}
		}
	}
	return live
}

// intern gives the state of a thread set at a position where the
// assertions in left hold; r.mu must be held, or r be new.
func (r *regex) intern(pcs []uint32, left syntax.EmptyOp) *rxState {
	if left&syntax.EmptyBeginText == 0 {
		pcs = slices.DeleteFunc(pcs, func(pc uint32) bool { return !r.live[pc] })
	}
	var k strings.Builder
	k.WriteString(strconv.Itoa(int(left)))
	k.WriteByte(':')
	for _, pc := range pcs {
		k.WriteString(strconv.FormatUint(uint64(pc), 36))
		k.WriteByte(',')
	}
	if s, ok := r.states[k.String()]; ok {
		return s
	}
	r.n++
	s := &rxState{re: r, id: r.n, pcs: pcs, left: left, dead: len(pcs) == 0}
	// At the end of text: the pending assertions hold (end of text and of
	// line), and a match must be reachable.
	for _, pc := range r.closure(nil, pcs, left|syntax.EmptyEndText|syntax.EmptyEndLine) {
		if r.prog.Inst[pc].Op == syntax.InstMatch {
			s.final = true
		}
	}
	r.states[k.String()] = s
	return s
}

// next is the state after rune c (a dead state when nothing matches).
func (s *rxState) next(c rune) *rxState {
	if c >= 0 && c < 128 {
		if n := s.ascii[c].Load(); n != nil {
			return n
		}
	}
	r := s.re
	r.mu.Lock()
	defer r.mu.Unlock()
	if c >= 128 {
		if n, ok := s.other[c]; ok {
			return n
		}
	}
	// What c is to the assertions before it: the end of a line when it is
	// a newline; never the end of text.
	before := s.left
	if c == '\n' {
		before |= syntax.EmptyEndLine
	}
	pending := r.closure(nil, s.pcs, before)
	var after syntax.EmptyOp
	if c == '\n' {
		after = syntax.EmptyBeginLine
	}
	var outs []uint32
	for _, pc := range pending {
		in := &r.prog.Inst[pc]
		switch in.Op {
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			if in.MatchRune(c) {
				outs = append(outs, in.Out)
			}
		}
	}
	var n *rxState
	if len(r.states) >= maxRegexStates {
		n = r.deadState()
	} else {
		n = r.intern(r.closure(nil, outs, after), after)
	}
	if c >= 0 && c < 128 {
		s.ascii[c].Store(n)
	} else {
		if s.other == nil {
			s.other = map[rune]*rxState{}
		}
		s.other[c] = n
	}
	return n
}

// admits reports whether some rune in lo…hi other than a newline leaves
// the state alive: whether a partial UTF-8 character (or \u escape) that
// may complete to any of them can still continue the text. It does not
// allocate once the state's ranges are built.
func (s *rxState) admits(lo, hi rune) bool {
	p := s.viable.Load()
	if p == nil {
		p = s.buildViable()
	}
	rs := *p
	// The first range that ends at or after lo.
	i, j := 0, len(rs)
	for i < j {
		h := int(uint(i+j) >> 1)
		if rs[h].hi < lo {
			i = h + 1
		} else {
			j = h
		}
	}
	return i < len(rs) && rs[i].lo <= hi
}

// takes reports whether some rune in lo…hi leaves the state alive (a
// newline decided by next, since it is the end of a line to what came
// before).
func (s *rxState) takes(lo, hi rune) bool {
	if lo <= '\n' && '\n' <= hi && !s.next('\n').dead {
		return true
	}
	return s.admits(lo, hi)
}

func (s *rxState) buildViable() *[]runeRange {
	r := s.re
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := s.viable.Load(); p != nil {
		return p
	}
	var rs []runeRange
	add := func(lo, hi rune) {
		// A newline is left out (see takes).
		if lo <= '\n' && '\n' <= hi {
			if lo < '\n' {
				rs = append(rs, runeRange{lo, '\n' - 1})
			}
			lo = '\n' + 1
		}
		if lo <= hi {
			rs = append(rs, runeRange{lo, hi})
		}
	}
	// As next does for a rune other than a newline: the threads that the
	// assertions before it let through, each rune instruction's successor
	// alive if its closure keeps a live thread (what intern keeps).
	for _, pc := range r.closure(nil, s.pcs, s.left) {
		in := &r.prog.Inst[pc]
		switch in.Op {
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
		default:
			continue
		}
		if !slices.ContainsFunc(r.closure(nil, []uint32{in.Out}, 0), func(pc uint32) bool { return r.live[pc] }) {
			continue
		}
		switch {
		case in.Op == syntax.InstRuneAny || in.Op == syntax.InstRuneAnyNotNL:
			add(0, unicode.MaxRune)
		case len(in.Rune) == 1:
			// One rune, and with FoldCase those it folds to (as MatchRune).
			r0 := in.Rune[0]
			add(r0, r0)
			if in.Op == syntax.InstRune && syntax.Flags(in.Arg)&syntax.FoldCase != 0 {
				for f := unicode.SimpleFold(r0); f != r0; f = unicode.SimpleFold(f) {
					add(f, f)
				}
			}
		default:
			for k := 0; k+1 < len(in.Rune); k += 2 {
				add(in.Rune[k], in.Rune[k+1])
			}
		}
	}
	slices.SortFunc(rs, func(a, b runeRange) int { return int(a.lo - b.lo) })
	merged := rs[:0]
	for _, g := range rs {
		if n := len(merged); n > 0 && g.lo <= merged[n-1].hi+1 {
			merged[n-1].hi = max(merged[n-1].hi, g.hi)
			continue
		}
		merged = append(merged, g)
	}
	s.viable.Store(&merged)
	return &merged
}

func (r *regex) deadState() *rxState {
	return r.intern(nil, 0)
}
