package jinja

// analyzeMacro records whether a macro body reads the special names
// varargs, kwargs and caller, which decide what arguments it accepts.
func analyzeMacro(def *macroDef) {
	var walk func(n any)
	walk = func(n any) {
		switch x := n.(type) {
		case nil:
		case *nameExpr:
			switch x.name {
			case "varargs":
				def.catchVarargs = true
			case "kwargs":
				def.catchKwargs = true
			case "caller":
				def.usesCaller = true
			}
		case []node:
			for _, c := range x {
				walk(c)
			}
		case []expr:
			for _, c := range x {
				walk(c)
			}
		case *textStmt, *constExpr, *breakStmt, *continueStmt:
		case *outputStmt:
			walk(x.expr)
		case *ifStmt:
			walk(x.conds)
			for _, b := range x.bodies {
				walk(b)
			}
			walk(x.els)
		case *forStmt:
			walk(x.iter)
			walk(x.filter)
			walk(x.body)
			walk(x.els)
		case *setStmt:
			walk(x.value)
		case *setBlockStmt:
			walk(x.body)
			for _, f := range x.filters {
				walk(f)
			}
		case *macroStmt:
			// Nested macros have their own scope; only their defaults
			// are evaluated in ours.
			walk(x.def.defaults)
		case *callBlockStmt:
			walk(x.call)
			walk(x.caller.defaults)
		case *filterBlockStmt:
			walk(x.body)
			for _, f := range x.filters {
				walk(f)
			}
		case *withStmt:
			walk(x.values)
			walk(x.body)
		case *scopeBlockStmt:
			walk(x.body)
		case *getattrExpr:
			walk(x.obj)
		case *getitemExpr:
			walk(x.obj)
			walk(x.key)
		case *sliceExpr:
			walk(x.start)
			walk(x.stop)
			walk(x.step)
		case *callExpr:
			walk(x.fn)
			walk(x.args)
			for _, k := range x.kwargs {
				walk(k.val)
			}
			walk(x.dynArgs)
			walk(x.dynKw)
		case *filterExpr:
			walk(x.arg)
			walk(x.args)
			for _, k := range x.kwargs {
				walk(k.val)
			}
			walk(x.dynArgs)
			walk(x.dynKw)
		case *testExpr:
			walk(x.arg)
			walk(x.args)
			for _, k := range x.kwargs {
				walk(k.val)
			}
			walk(x.dynArgs)
			walk(x.dynKw)
		case *notExpr:
			walk(x.x)
		case *negExpr:
			walk(x.x)
		case *binExpr:
			walk(x.l)
			walk(x.r)
		case *andExpr:
			walk(x.l)
			walk(x.r)
		case *orExpr:
			walk(x.l)
			walk(x.r)
		case *concatExpr:
			walk(x.items)
		case *compareExpr:
			walk(x.first)
			for _, o := range x.ops {
				walk(o.x)
			}
		case *condExpr:
			walk(x.test)
			walk(x.yes)
			walk(x.no)
		case *listExpr:
			walk(x.items)
		case *dictExpr:
			walk(x.keys)
			walk(x.vals)
		}
	}
	walk(def.body)
}
