package plugins

import (
	"context"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/infernix/infernix/plugins/internal/luapattern"
)

// The string library's pattern functions on luapattern (see
// hardenStringLib). Arguments, results and the treatment of odd
// arguments follow gopher-lua's functions, which plugins were written
// against; pattern errors read as Lua 5.1's.

// callContext is the call's context (none only outside calls).
func callContext(L *lua.LState) context.Context {
	if ctx := L.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// initOffset turns a 1-based init argument (negative: from the end, 0 as
// 1) into a 0-based offset into s (past its end when init is).
func initOffset(s string, init int) int {
	switch {
	case init > 0:
		return init - 1
	case init == 0:
		return 0
	}
	return max(len(s)+init, 0)
}

// compilePattern checks pat, raising Lua's error for a malformed one.
func compilePattern(L *lua.LState, pat string) *luapattern.Pattern {
	p, err := luapattern.Compile(pat)
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	return p
}

// matchFailed raises the error that stopped a match: a fault in the
// pattern, the call's deadline, or a pattern too deep to match.
func matchFailed(L *lua.LState, name string, err error) {
	if _, ok := err.(*luapattern.Error); ok {
		L.RaiseError("%s", err.Error())
	}
	L.RaiseError("string.%s: %v", name, err)
}

// pushCaptures pushes the captures of the match s[start:end] (positions
// 1-based), or the match itself when the pattern has none and whole is
// set; it returns how many values it pushed.
func pushCaptures(L *lua.LState, s string, caps []luapattern.Capture, start, end int, whole bool) int {
	if len(caps) == 0 {
		if !whole {
			return 0
		}
		L.Push(lua.LString(s[start:end]))
		return 1
	}
	for _, c := range caps {
		L.Push(captureValue(s, c))
	}
	return len(caps)
}

func captureValue(s string, c luapattern.Capture) lua.LValue {
	if c.Position {
		return lua.LNumber(c.Start + 1)
	}
	return lua.LString(s[c.Start:c.End])
}

// findFirst is string.find's and string.match's search: the first match
// of pat in s at or after init (0-based), its captures and span.
func findFirst(L *lua.LState, what, s, pat string, init int) (caps []luapattern.Capture, start, end int, ok bool) {
	p := compilePattern(L, pat)
	if init > len(s) {
		return nil, 0, 0, false
	}
	m := p.NewMatcher(callContext(L), s)
	start, end, ok, err := m.Find(p, init)
	if err != nil {
		matchFailed(L, what, err)
	}
	if !ok {
		return nil, 0, 0, false
	}
	return m.Captures(), start, end, true
}

// strFind is string.find; plain searches (an empty pattern or the plain
// flag) are left to gopher-lua's, plain.
func strFind(plain lua.LGFunction) lua.LGFunction {
	return func(L *lua.LState) int {
		s, pat := L.CheckString(1), L.CheckString(2)
		init := initOffset(s, L.OptInt(3, 1))
		if len(pat) == 0 || (L.GetTop() == 4 && lua.LVAsBool(L.Get(4))) {
			return plain(L)
		}
		caps, start, end, ok := findFirst(L, "find", s, pat, init)
		if !ok {
			L.Push(lua.LNil)
			return 1
		}
		L.Push(lua.LNumber(start + 1))
		L.Push(lua.LNumber(end))
		return 2 + pushCaptures(L, s, caps, start, end, false)
	}
}

// strMatch is string.match.
func strMatch(L *lua.LState) int {
	s, pat := L.CheckString(1), L.CheckString(2)
	caps, start, end, ok := findFirst(L, "match", s, pat, initOffset(s, L.OptInt(3, 1)))
	if !ok {
		L.Push(lua.LNil)
		return 1
	}
	return pushCaptures(L, s, caps, start, end, true)
}

// strGmatch is string.gmatch (gfind, its old name, when name says so). An
// anchored pattern matches at most once, at the start, as in gopher-lua.
func strGmatch(name string) lua.LGFunction {
	return func(L *lua.LState) int {
		s, pat := L.CheckString(1), L.CheckString(2)
		p := compilePattern(L, pat)
		pos, done := 0, false
		L.Push(L.NewFunction(func(L *lua.LState) int {
			m := p.NewMatcher(callContext(L), s)
			for ; !done && pos <= len(s); pos++ {
				done = p.Anchored()
				end, ok, err := m.MatchAt(pos)
				if err != nil {
					matchFailed(L, name, err)
				}
				if ok {
					start := pos
					pos = end
					if end == start {
						pos++ // an empty match: go on after it
					}
					return pushCaptures(L, s, m.Captures(), start, end, true)
				}
			}
			return 0
		}))
		return 1
	}
}

// strGsub is string.gsub. The result is built in one pass (unmatched text
// is copied in spans) and may be at most maxStringBytes longer than s.
func strGsub(L *lua.LState) int {
	s := L.CheckString(1)
	pat := L.CheckString(2)
	L.CheckTypes(3, lua.LTString, lua.LTTable, lua.LTFunction)
	repl := L.CheckAny(3)
	limit := L.OptInt(4, -1)
	p := compilePattern(L, pat)

	maxLen := len(s) + maxStringBytes
	var b strings.Builder
	write := func(piece string) {
		if b.Len()+len(piece) > maxLen {
			L.RaiseError("string.gsub: the result would exceed %d bytes", maxLen)
		}
		if b.Cap()-b.Len() < len(piece) {
			b.Grow(max(len(piece), b.Len())) // double: Go grows large buffers by 1.25x
		}
		b.WriteString(piece)
	}
	// capture is %k of the replacement string for the match s[start:end].
	capture := func(caps []luapattern.Capture, start, end, k int) string {
		switch {
		case k == 0 || (k == 1 && len(caps) == 0):
			return s[start:end]
		case k > len(caps):
			L.RaiseError("invalid capture index")
		case caps[k-1].Position:
			return strconv.Itoa(caps[k-1].Start + 1)
		}
		return s[caps[k-1].Start:caps[k-1].End]
	}

	m := p.NewMatcher(callContext(L), s)
	copied := 0 // s[:copied] is accounted for in b
	n := 0
	for si := 0; limit < 0 || n < limit; {
		end, ok, err := m.MatchAt(si)
		if err != nil {
			matchFailed(L, "gsub", err)
		}
		if ok {
			n++
			caps := m.Captures()
			var value lua.LValue = lua.LNil // nil or false: keep the match
			switch r := repl.(type) {
			case lua.LString:
				write(s[copied:si])
				copied = end
				expandReplacement(string(r), write, func(k int) string { return capture(caps, si, end, k) })
			case *lua.LTable:
				key := lua.LValue(lua.LString(s[si:end]))
				if len(caps) > 0 {
					key = captureValue(s, caps[0])
				}
				value = L.GetTable(r, key)
			case *lua.LFunction:
				L.Push(r)
				L.Call(pushCaptures(L, s, caps, si, end, true), 1)
				value = L.Get(-1)
				L.Pop(1)
			}
			if !lua.LVIsFalse(value) {
				write(s[copied:si])
				copied = end
				write(lua.LVAsString(value))
			}
		}
		switch {
		case ok && end > si:
			si = end
		case si < len(s):
			si++
		default:
			si = -1
		}
		if si < 0 || p.Anchored() {
			break
		}
	}
	write(s[copied:])
	L.Push(lua.LString(b.String()))
	L.Push(lua.LNumber(n))
	return 2
}

// expandReplacement writes gsub's replacement string repl for one match:
// %0-%9 are captures (capture k), %% is %, and any other % stays as
// written (gopher-lua keeps it, where Lua 5.1 would drop the %).
func expandReplacement(repl string, write func(string), capture func(k int) string) {
	for len(repl) > 0 {
		i := strings.IndexByte(repl, '%')
		if i < 0 || i == len(repl)-1 {
			write(repl)
			return
		}
		write(repl[:i])
		switch d := repl[i+1]; {
		case d == '%':
			write("%")
		case '0' <= d && d <= '9':
			write(capture(int(d - '0')))
		default:
			write(repl[i : i+2])
		}
		repl = repl[i+2:]
	}
}
