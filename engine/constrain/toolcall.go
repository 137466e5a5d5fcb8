package constrain

import (
	"bytes"
	"fmt"
)

// Tool is a function tool whose calls a grammar constrains.
type Tool struct {
	Name       string
	Parameters []byte // a JSON schema; empty: any object
	// Strict: the arguments must follow Parameters exactly, so a schema
	// with keywords constrained decoding cannot enforce is an error;
	// otherwise they compile as by CompileLoose, and as any object where
	// even that fails.
	Strict bool
}

// ToolError is a strict tool's schema that cannot be enforced.
type ToolError struct {
	Index int // the tool's index in the list
	Err   *SchemaError
}

func (e *ToolError) Error() string { return fmt.Sprintf("tool %d: %v", e.Index, e.Err) }

// ToolCall compiles the grammar of one tool call's JSON body,
// {"name": NAME, "arguments": ARGUMENTS}, in that order (as Qwen's chat
// templates write it), for any of tools: the body after <tool_call> in the
// JSON tool format, with at most two whitespace bytes after it (what comes
// before </tool_call>; see Gate).
func ToolCall(tools []Tool) (*Grammar, error) {
	if len(tools) == 0 {
		return nil, fmt.Errorf("constrained decoding: no tools")
	}
	// One compiler for every tool, so that node ids stay unique across the
	// grammar (the mask cache keys on them); each schema resolves its own
	// references.
	c := &compiler{}
	var calls []*node
	for i, t := range tools {
		args, err := c.toolArguments(t)
		if err != nil {
			return nil, &ToolError{Index: i, Err: err}
		}
		name := c.newNode(kLiteral)
		name.lits = []string{quoteJSON(t.Name)}
		call := c.newNode(kObject)
		call.props = []prop{{value: name, required: true}, {value: args, required: true}}
		call.keys = []string{`"name"`, `"arguments"`}
		call.reqFrom = []bool{true, true, false}
		calls = append(calls, call)
	}
	// The body may end with the newline before </tool_call> in one token.
	root := c.union(calls)
	root.trail = maxCloseSpace
	return &Grammar{root: root, nodes: c.nodes}, nil
}

// toolArguments compiles a tool's parameters (see Tool.Strict).
func (c *compiler) toolArguments(t Tool) (*node, *SchemaError) {
	anyObject := func() *node {
		n := c.newNode(kObject)
		n.extra = c.newNode(kAny)
		return n
	}
	if len(bytes.TrimSpace(t.Parameters)) == 0 {
		return anyObject(), nil
	}
	mark := c.nodes
	n, err := c.tryCompile(t.Parameters, !t.Strict)
	if err == nil && n.kind == kAny {
		n = anyObject() // {} or true: arguments are still an object
	}
	if err != nil {
		if t.Strict {
			return nil, err
		}
		c.nodes = mark
		n = anyObject()
	}
	return n, nil
}

func (c *compiler) tryCompile(schema []byte, loose bool) (*node, *SchemaError) {
	doc, err := parseValue(schema)
	if err != nil {
		return nil, &SchemaError{Msg: "not JSON: " + err.Error()}
	}
	c.doc, c.refs, c.loose = doc, map[string]*node{}, loose
	n, err := c.compile(doc, "")
	if err != nil {
		se, ok := err.(*SchemaError)
		if !ok {
			se = &SchemaError{Msg: err.Error()}
		}
		return nil, se
	}
	return n, nil
}

// union is a union of ns, nested in unions of at most maxAlternatives.
func (c *compiler) union(ns []*node) *node {
	if len(ns) == 1 {
		return ns[0]
	}
	for len(ns) > maxAlternatives {
		var groups []*node
		for i := 0; i < len(ns); i += maxAlternatives {
			u := c.newNode(kUnion)
			u.alts = ns[i:min(i+maxAlternatives, len(ns))]
			groups = append(groups, u)
		}
		ns = groups
	}
	u := c.newNode(kUnion)
	u.alts = ns
	return u
}
