package jinja

import (
	"strings"
	"time"
)

// Template is a compiled template. It is immutable and safe for concurrent
// Execute calls.
type Template struct {
	name string
	body []node
}

// Compile parses source once into a Template. Syntax errors are
// *SyntaxError values naming the template and line. Unknown filters and
// tests are reported here too, like jinja2 does at compile time.
func Compile(name, source string) (*Template, error) {
	toks, err := tokenize(name, source)
	if err != nil {
		return nil, err
	}
	body, err := parseTemplate(name, toks)
	if err != nil {
		return nil, err
	}
	return &Template{name: name, body: body}, nil
}

// Name returns the name given to Compile.
func (t *Template) Name() string { return t.name }

// Options tune one execution. The zero value is valid.
type Options struct {
	// Now is the clock behind strftime_now(); time.Now when nil.
	Now func() time.Time
	// MaxSteps bounds the number of evaluation steps (statements and
	// expression nodes); DefaultMaxSteps when zero.
	MaxSteps int
}

// DefaultMaxSteps is large enough for any real conversation (the Qwen
// templates take about 100 steps per message, so 100,000 messages fit) and
// small enough that a looping template fails within seconds.
const DefaultMaxSteps = 10_000_000

// maxCallDepth bounds macro recursion and expression nesting at run time.
const maxCallDepth = 400

// Execute renders the template with vars as its context (the keyword
// arguments of jinja2's Template.render). The map is not modified.
func (t *Template) Execute(vars map[string]Value) (string, error) {
	return t.ExecuteOptions(vars, Options{})
}

// ExecuteOptions is Execute with options.
func (t *Template) ExecuteOptions(vars map[string]Value, o Options) (string, error) {
	ev := &evaluator{tmpl: t, vars: vars, maxSteps: o.MaxSteps, now: o.Now}
	if ev.maxSteps <= 0 {
		ev.maxSteps = DefaultMaxSteps
	}
	if ev.now == nil {
		ev.now = time.Now
	}
	var sb strings.Builder
	ev.out = &sb
	top := &scope{}
	if _, err := ev.execBody(t.body, top); err != nil {
		return "", ev.annotate(err)
	}
	return sb.String(), nil
}

// annotate adds the template name and current line to runtime errors.
func (ev *evaluator) annotate(err error) error {
	if re, ok := err.(*RuntimeError); ok && re.Line == 0 {
		c := *re
		c.Name = ev.tmpl.name
		c.Line = ev.line
		return &c
	}
	return err
}
