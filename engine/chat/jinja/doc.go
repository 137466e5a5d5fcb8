// Package jinja is a Jinja2 interpreter focused on chat templates: it
// reproduces jinja2 3.1 as transformers configures it
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, the
// loopcontrols extension, transformers' tojson, raise_exception and
// strftime_now, and its {% generation %} tag), with Python semantics for
// values.
//
// Compile lexes and parses a template once into an immutable AST; Execute
// walks it. Values follow Python: ints of any size, floats printed like
// repr(), str indexed by code point, insertion-ordered dicts, Markup
// strings from |safe, generators from filters like select and map.
// Undefined values print as "", are false and iterate as empty; any other
// use raises UndefinedError with jinja2's message.
//
// Supported: if/elif/else, for (tuple targets, loop filters, else,
// break/continue, the loop object), set (tuple, namespace attribute and
// block forms), macro with defaults/varargs/kwargs/caller, call blocks,
// filter blocks, with, raw, print, block (rendered in place), comments and
// all whitespace control; the full expression grammar; the filters and
// tests of jinja2 that chat templates use (see filters.go, itests.go); the
// non-mutating Python str/dict/list methods (methods.go); printf-style %
// and str.format.
//
// Deliberate differences: extends/include/import/from/autoescape and
// recursive loops are syntax errors (transformers has no loader); unknown
// filters and tests fail at compile time; range() returns a list; a few
// rarely used filters (urlize, xmlattr, pprint, random, filesizeformat,
// wordwrap, urlencode) are absent. Execution is bounded by a step budget,
// a recursion depth and a 64 MiB cap on strings, so hostile templates fail
// with a *RuntimeError instead of hanging or exhausting memory.
package jinja
