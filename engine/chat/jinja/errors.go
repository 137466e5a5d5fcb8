package jinja

import (
	"fmt"
	"reflect"
)

// TemplateError is raised by the template itself through
// raise_exception(message); Message is exactly the template's message.
type TemplateError struct {
	Message string
}

func (e *TemplateError) Error() string { return e.Message }

// SyntaxError reports a template that does not compile. Line is 1-based.
type SyntaxError struct {
	Name string // template name given to Compile
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("template %q, line %d: %s", e.Name, e.Line, e.Msg)
}

// RuntimeError is any other failure while rendering. Type is the Python
// exception class jinja2 raises in the same situation ("UndefinedError",
// "TypeError", "ValueError", "SecurityError", ...) and Msg its message,
// matched to Python's wording where practical. Limit errors (step, depth
// and size budgets) have Type "LimitError".
type RuntimeError struct {
	Type string
	Msg  string
	Name string // template name
	Line int    // line of the statement being executed, 0 if unknown
}

func (e *RuntimeError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("template %q, line %d: %s: %s", e.Name, e.Line, e.Type, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Type, e.Msg)
}

func rtErrorf(typ, format string, args ...any) error {
	return &RuntimeError{Type: typ, Msg: fmt.Sprintf(format, args...)}
}

func typeErrorf(format string, args ...any) error { return rtErrorf("TypeError", format, args...) }

func valueErrorf(format string, args ...any) error { return rtErrorf("ValueError", format, args...) }

// undefinedError is the error raised when an undefined value is used in a
// way other than printing, testing or iterating.
func undefinedError(v Value) error {
	u := v.undef()
	if u == nil {
		return rtErrorf("UndefinedError", "'%s' is undefined", "")
	}
	typ := u.excType
	if typ == "" {
		typ = "UndefinedError"
	}
	return &RuntimeError{Type: typ, Msg: u.message()}
}

func (u *undefInfo) message() string {
	if u.hint != "" {
		return u.hint
	}
	if u.objType == "" {
		return pyRepr(u.name) + " is undefined"
	}
	if u.name.kind != KindString {
		return u.objType + " has no element " + pyRepr(u.name)
	}
	return pyRepr(String(u.objType)) + " has no attribute " + pyRepr(u.name)
}

// ptrID is the identity of a reference value (Python's id()).
func ptrID(v Value) uintptr {
	if v.ref == nil {
		return 0
	}
	return reflect.ValueOf(v.ref).Pointer()
}
