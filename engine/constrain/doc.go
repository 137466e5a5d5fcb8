// Package constrain restricts generation to a language: JSON, optionally of
// a schema; a regular expression or a list of choices (text.go); a GBNF
// grammar (gbnf.go); a tool call's body (toolcall.go, xml.go). It is the
// engine's constrained decoding, behind OpenAI's response_format
// (json_object, json_schema), the Responses API's text.format, vLLM's and
// llama.cpp's guided fields, strict and forced tool calls and the grammar
// hook.
//
// Compile turns a JSON Schema into a Grammar (immutable, shared by any
// number of requests). A Vocab indexes a tokenizer's tokens by their bytes
// (a trie, built once). Grammar.Matcher gives one sequence's Matcher, which
// implements sched.Constraint: before each generated token it says which
// tokens may come next (the tokens whose bytes keep the output a prefix of
// some accepted document) and whether the document may end there; after it,
// it advances by the token.
//
// Tool calls: ToolCall compiles the grammar of a call's JSON body for a
// list of tools ({"name": …, "arguments": …} with each tool's parameters),
// ToolCallXML the same in the XML format (<function=…> and <parameter=…>
// tags, raw string values, xml.go),
// and Gate puts a grammar in force only between a trigger token
// (<tool_call>) and a close token (</tool_call>), any number of times, the
// output free in between (sched.Intermittent): strict tools' calls, and
// forced calls whose opening the prompt already holds (Gate.Open).
//
// The language is byte-level: a byte pushdown automaton whose state is a
// small set of configurations (alternatives of anyOf, enum values that are
// prefixes of one another). Masks are cached per grammar by the automaton's
// state, so a sequence that stays inside a string pays the vocabulary walk
// once.
//
// What is enforced, and how:
//   - whitespace where JSON allows it, as one space or a newline and at
//     most MaxIndent spaces or tabs (so that no model pads forever), at most
//     MaxLeading bytes before the document and none after it; numbers of
//     at most 32 bytes; strings of valid UTF-8 without control characters;
//   - objects with "properties" take those properties only, in the order the
//     schema lists them, the "required" ones never skipped (OpenAI's
//     structured outputs produce the same order); objects without
//     "properties" take any keys, their values "additionalProperties" (a
//     schema, or any JSON when true or absent);
//   - "type" (one or a list), "enum", "const", "anyOf", "oneOf" (as anyOf),
//     "allOf" of one schema, "$ref" to "#", "#/$defs/…" or
//     "#/definitions/…" (recursion allowed), "items", "minItems",
//     "maxItems", "nullable"; at most 64 enum values, properties or
//     alternatives in one place;
//   - strings' "minLength" and "maxLength" (in characters) and "pattern"
//     (Go's regexp syntax, RE2: no lookaround or backreferences, and no
//     \b; it matches anywhere unless anchored), run on the decoded string as
//     a lazily built DFA that stops a string at the first character after
//     which no match can follow; "format" date, time, date-time, duration,
//     email, hostname, ipv4, ipv6 and uuid as patterns (other formats are
//     annotations); a constrained string takes no surrogate \u escapes, and
//     an escape (its backslash, its letter, each \u hex digit) only where
//     some character it may still write is one the string takes next;
//   - integers' and numbers' "minimum", "maximum", "exclusiveMinimum" and
//     "exclusiveMaximum" (numbers, or draft 4's booleans): a digit is
//     allowed only if some value within the bounds starts with the digits
//     so far; a bounded number is written without an exponent and compared
//     exactly as a decimal of up to 18 significant digits (decimal.go);
//     bounds on a schema without a "type" are not enforced;
//   - integers' "multipleOf" (a positive integer): a digit is allowed only
//     if a multiple within the bounds starts with the digits so far;
//   - annotations ("title", "description", "default", "examples",
//     "$schema", "$id", "$comment", "strict", "format", "deprecated",
//     "readOnly", "writeOnly") are ignored; any other keyword is refused
//     with its path by Compile, since output that silently ignores a
//     constraint is worse than a clear error; CompileLoose ignores the
//     keywords that only narrow values (a number's multipleOf, uniqueItems,
//     …) for schemas not written for constrained decoding.
package constrain
