package toolcall

import "encoding/json"

// kind is a JSON type a schema can declare for a parameter.
type kind uint8

const (
	kString kind = iota
	kInteger
	kNumber
	kBoolean
	kObject
	kArray
	kNull
)

var kindNames = map[string]kind{
	"string": kString, "integer": kInteger, "number": kNumber, "boolean": kBoolean,
	"object": kObject, "array": kArray, "null": kNull,
}

// toolSet answers which functions were declared and which types their
// parameters have. It is built once per request.
type toolSet struct {
	restrict bool                         // a tool list was given: other names are not calls
	params   map[string]map[string][]kind // function → parameter → declared types
}

func newToolSet(tools []Tool) toolSet {
	ts := toolSet{restrict: len(tools) > 0, params: make(map[string]map[string][]kind, len(tools))}
	for _, t := range tools {
		ts.params[t.Name] = schemaKinds(t.Parameters)
	}
	return ts
}

func (ts *toolSet) declared(name string) bool {
	if !ts.restrict {
		return true
	}
	_, ok := ts.params[name]
	return ok
}

// kinds returns the declared types of a parameter; nil means "keep a string".
func (ts *toolSet) kinds(fn, param string) []kind {
	return ts.params[fn][param]
}

// schemaProp is the part of a property schema that names its types.
type schemaProp struct {
	Type  json.RawMessage `json:"type"`
	AnyOf []schemaProp    `json:"anyOf"`
	OneOf []schemaProp    `json:"oneOf"`
}

// schemaKinds reads parameters.properties.*.type (a name or a list of names,
// also inside anyOf/oneOf). A schema it cannot read yields no types, which
// makes every parameter a string: the safe default.
func schemaKinds(schema json.RawMessage) map[string][]kind {
	if len(schema) == 0 {
		return nil
	}
	var s struct {
		Properties map[string]schemaProp `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Properties) == 0 {
		return nil
	}
	out := make(map[string][]kind, len(s.Properties))
	for name, prop := range s.Properties {
		if ks := propKinds(prop, nil); len(ks) > 0 {
			out[name] = ks
		}
	}
	return out
}

func propKinds(p schemaProp, ks []kind) []kind {
	var one string
	var many []string
	if json.Unmarshal(p.Type, &one) == nil {
		many = []string{one}
	} else {
		_ = json.Unmarshal(p.Type, &many) // not a list either: no types here
	}
	for _, n := range many {
		if k, ok := kindNames[n]; ok {
			ks = appendKind(ks, k)
		}
	}
	for _, sub := range p.AnyOf {
		ks = propKinds(sub, ks)
	}
	for _, sub := range p.OneOf {
		ks = propKinds(sub, ks)
	}
	return ks
}

func appendKind(ks []kind, k kind) []kind {
	for _, x := range ks {
		if x == k {
			return ks
		}
	}
	return append(ks, k)
}

// typed reports whether a value needs conversion, and so must be buffered
// until complete instead of streamed as a string.
func typed(ks []kind) bool {
	for _, k := range ks {
		if k != kString {
			return true
		}
	}
	return false
}
