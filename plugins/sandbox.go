package plugins

import (
	"fmt"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// maxArrayIndex is the largest index a table keeps in its array part
// (gopher-lua's MaxArrayIndex, 64M by default): t[n] = v with n past the
// end fills the gap with nils in one instruction, so t[67108863] = 1 took a
// GB and tens of seconds that the call's timeout could not stop. Keys past
// it live in the hash part (the # of a sequence stops counting there).
const maxArrayIndex = 1 << 20

func init() { lua.MaxArrayIndex = maxArrayIndex }

// registryGrowStep is how many slots the Lua value stack grows by at a
// time. gopher-lua's default of 32 copies the whole stack every 32 pushes,
// so string.byte(s, 1, -1) on a 10 MB string or unpack(t, 1, 1e8) ran for
// 10–20 s of quadratic copying before reaching the registry's limit.
const registryGrowStep = 4096

// maxStringBytes bounds the strings string.rep and table.concat build, and
// how much string.gsub may add to its subject: gopher-lua's allocate
// whatever they are asked for in one Go call, so string.rep("x", 1e12)
// would take the process down before the call's timeout could stop it.
const maxStringBytes = 16 << 20

// hardenStringLib replaces library functions whose Go code the call's
// timeout cannot interrupt. string.rep and table.concat get a size limit;
// string.find, match, gmatch (gfind) and gsub match patterns with
// luapattern, our own matcher, which stops at the call's deadline (on
// gopher-lua's, a backtracking pattern such as ".-.-.-.-x" on a long
// string would run for hours) and bounds its recursion; string.gsub also
// builds its result in linear time (gopher-lua's copies the whole string
// for every match) and within the size limit. Plain string.find (an empty
// pattern or the plain flag) is gopher-lua's, a linear search.
func hardenStringLib(L *lua.LState) {
	str, ok := L.GetGlobal(lua.StringLibName).(*lua.LTable)
	if !ok {
		return
	}
	str.RawSetString("rep", L.NewFunction(strRep))
	str.RawSetString("gsub", L.NewFunction(strGsub))
	str.RawSetString("match", L.NewFunction(strMatch))
	str.RawSetString("gmatch", L.NewFunction(strGmatch("gmatch")))
	str.RawSetString("gfind", L.NewFunction(strGmatch("gfind")))
	if orig, ok := str.RawGetString("find").(*lua.LFunction); ok && orig.IsG {
		str.RawSetString("find", L.NewFunction(strFind(orig.GFunction)))
	}
	if tbl, ok := L.GetGlobal(lua.TabLibName).(*lua.LTable); ok {
		if orig, ok := tbl.RawGetString("concat").(*lua.LFunction); ok && orig.IsG {
			tbl.RawSetString("concat", L.NewFunction(guardConcat(orig.GFunction)))
		}
	}
}

// maxChunkBytes bounds the code load and loadstring compile: gopher-lua's
// compiler recurses once per nesting level, and a chunk of a few MB of
// "not not not …" overflows the Go stack, a fatal error no recover stops.
// 256 KB nests at most ~128k levels, some 80 MB of stack.
const maxChunkBytes = 256 << 10

// hardenLoaders limits the size of the chunks load and loadstring compile
// (the base library's functions are otherwise unchanged).
func hardenLoaders(L *lua.LState) {
	g, ok := L.Get(lua.GlobalsIndex).(*lua.LTable)
	if !ok {
		return
	}
	loadstring, ok := g.RawGetString("loadstring").(*lua.LFunction)
	if !ok || !loadstring.IsG {
		return
	}
	orig := loadstring.GFunction
	tooBig := fmt.Sprintf("chunk larger than %d bytes", maxChunkBytes)
	g.RawSetString("loadstring", L.NewFunction(func(L *lua.LState) int {
		if len(L.CheckString(1)) > maxChunkBytes {
			L.Push(lua.LNil)
			L.Push(lua.LString(tooBig))
			return 2
		}
		return orig(L)
	}))
	// load(fn, chunkname) as gopher-lua's: fn returns the chunk's pieces
	// until nil or "". The pieces are compiled by loadstring.
	g.RawSetString("load", L.NewFunction(func(L *lua.LState) int {
		fn := L.CheckFunction(1)
		chunkname := L.OptString(2, "?")
		top := L.GetTop()
		var buf strings.Builder
		for {
			L.SetTop(top)
			L.Push(fn)
			L.Call(0, 1)
			ret := L.Get(-1)
			L.Pop(1)
			if ret == lua.LNil {
				break
			}
			if !lua.LVCanConvToString(ret) {
				L.Push(lua.LNil)
				L.Push(lua.LString("reader function must return a string"))
				return 2
			}
			piece := ret.String()
			if len(piece) == 0 {
				break
			}
			if buf.Len()+len(piece) > maxChunkBytes {
				L.Push(lua.LNil)
				L.Push(lua.LString(tooBig))
				return 2
			}
			buf.WriteString(piece)
		}
		L.SetTop(0)
		L.Push(lua.LString(buf.String()))
		L.Push(lua.LString(chunkname))
		return orig(L)
	}))
}

func strRep(L *lua.LState) int {
	s := L.CheckString(1)
	n := L.CheckInt(2)
	if n <= 0 || len(s) == 0 {
		L.Push(lua.LString(""))
		return 1
	}
	if n > maxStringBytes/len(s) {
		L.RaiseError("string.rep: the result would exceed %d bytes", maxStringBytes)
	}
	L.Push(lua.LString(strings.Repeat(s, n)))
	return 1
}

// guardConcat checks that table.concat's result stays within
// maxStringBytes before the original builds it.
func guardConcat(orig lua.LGFunction) lua.LGFunction {
	return func(L *lua.LState) int {
		tbl := L.CheckTable(1)
		sep := L.OptString(2, "")
		n := tbl.Len()
		i, j := max(L.OptInt(3, 1), 1), min(L.OptInt(4, n), n)
		size := 0
		for k := i; k <= j; k++ {
			switch v := tbl.RawGetInt(k).(type) {
			case lua.LString:
				size += len(v)
			case lua.LNumber:
				size += len(v.String())
			default:
				k = j // the original raises the error
			}
			if size += len(sep); size > maxStringBytes {
				L.RaiseError("table.concat: the result would exceed %d bytes", maxStringBytes)
			}
		}
		return orig(L)
	}
}

// logPrint replaces print, which wrote to the server's stdout: a plugin's
// print goes to the log, as its log.info does.
func (p *plugin) logPrint(L *lua.LState) {
	L.SetGlobal("print", L.NewFunction(func(L *lua.LState) int {
		parts := make([]string, L.GetTop())
		for i := range parts {
			parts[i] = L.ToStringMeta(L.Get(i + 1)).String()
		}
		p.h.log.Info("plugin: "+strings.Join(parts, "\t"), "plugin", p.name)
		return 0
	}))
}
