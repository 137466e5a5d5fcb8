package jinja

// The AST is built once by Compile and only read afterwards, so one
// Template can render concurrently.

type node interface{ line() int }

type pos struct{ ln int }

func (p pos) line() int { return p.ln }

// Statements.

type textStmt struct {
	pos
	text string
}

type outputStmt struct {
	pos
	expr expr
}

type ifStmt struct {
	pos
	conds  []expr
	bodies [][]node // one per cond
	els    []node
}

type forStmt struct {
	pos
	target    *assignTarget
	iter      expr
	filter    expr
	body      []node
	els       []node
	recursive bool
}

type setStmt struct {
	pos
	target *assignTarget
	value  expr
}

type setBlockStmt struct {
	pos
	target  *assignTarget
	filters []*filterExpr // applied to the body, innermost first
	body    []node
}

type macroStmt struct {
	pos
	def *macroDef
}

type callBlockStmt struct {
	pos
	call   *callExpr
	caller *macroDef
}

type filterBlockStmt struct {
	pos
	filters []*filterExpr
	body    []node
}

type withStmt struct {
	pos
	targets []*assignTarget
	values  []expr
	body    []node
}

type scopeBlockStmt struct { // {% block %} without inheritance, {% generation %}
	pos
	body []node
}

type breakStmt struct{ pos }

type continueStmt struct{ pos }

type macroDef struct {
	name         string
	params       []string
	defaults     []expr // aligned to the last len(defaults) params
	body         []node
	catchKwargs  bool // body reads `kwargs`
	catchVarargs bool // body reads `varargs`
	usesCaller   bool // body reads `caller`
}

// assignTarget is a name, a tuple of targets, or a namespace attribute.
type assignTarget struct {
	name  string
	attr  string // for ns.attr
	items []*assignTarget
	tuple bool
}

// Expressions.

type expr interface{ node }

type constExpr struct {
	pos
	v Value
}

type nameExpr struct {
	pos
	name string
}

type getattrExpr struct {
	pos
	obj  expr
	attr string
}

type getitemExpr struct {
	pos
	obj expr
	key expr
}

type sliceExpr struct {
	pos
	start, stop, step expr // nil when omitted
}

type kwarg struct {
	name string
	val  expr
}

type callExpr struct {
	pos
	fn      expr
	args    []expr
	kwargs  []kwarg
	dynArgs expr
	dynKw   expr
}

type filterExpr struct {
	pos
	arg     expr // nil inside filter blocks
	name    string
	fn      filterFunc
	args    []expr
	kwargs  []kwarg
	dynArgs expr
	dynKw   expr
}

type testExpr struct {
	pos
	arg     expr
	name    string
	fn      testFunc
	args    []expr
	kwargs  []kwarg
	dynArgs expr
	dynKw   expr
}

type notExpr struct {
	pos
	x expr
}

type negExpr struct {
	pos
	x   expr
	neg bool // false: unary plus
}

type binExpr struct {
	pos
	op   string // + - * / // % **
	l, r expr
}

type andExpr struct {
	pos
	l, r expr
}

type orExpr struct {
	pos
	l, r expr
}

type concatExpr struct {
	pos
	items []expr
}

type cmpOp struct {
	op string // == != < <= > >= in notin
	x  expr
}

type compareExpr struct {
	pos
	first expr
	ops   []cmpOp
}

type condExpr struct {
	pos
	test, yes, no expr // no may be nil
}

type listExpr struct {
	pos
	items []expr
	tuple bool
}

type dictExpr struct {
	pos
	keys, vals []expr
}
