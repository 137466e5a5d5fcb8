package constrain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// kind is what a node accepts.
type kind uint8

const (
	kAny     kind = iota // any JSON value
	kObject              // props (in order), or any keys with extra values
	kArray               // items, minItems..maxItems of them
	kString              // any string
	kNumber              // any number
	kInteger             // a number without fraction or exponent
	kLiteral             // one of lits (JSON texts: enum, const, true/false, null)
	kUnion               // any of alts
	kText                // raw text matching rx in whole (CompileRegex)
	kGRule               // a GBNF rule: alts (kGSeq), lits[0] its name (gbnf.go)
	kGSeq                // a GBNF alternative: gel
	kXCall               // an XML tool call's body: one of props (kXArgs), keys their <function=…> tags
	kXArgs               // an XML call's parameters: props as kObject's, keys their <parameter=…> tags and </function> last
)

// maxAlternatives bounds enum values, object properties and anyOf members:
// the automaton tracks candidates in a 64-bit set.
const maxAlternatives = 64

// node is a compiled schema. Nodes form a graph ($ref may recurse); they are
// immutable once Compile returns.
type node struct {
	kind  kind
	id    int32
	props []prop   // kObject with properties
	keys  []string // props' keys as JSON strings, quotes included
	// reqFrom[i] reports that a required property is at index >= i.
	reqFrom  []bool
	extra    *node // kObject without properties: the values' schema
	items    *node // kArray
	minItems int
	maxItems int      // -1: no limit
	lits     []string // kLiteral
	alts     []*node  // kUnion
	// kString: the length bounds in runes (maxLen -1: none) and the
	// pattern.
	minLen, maxLen int32
	rx             *regex
	// kGSeq: the elements, and the grammar's interned frames.
	gel    []gelem
	frames *frameTable
	// raw: a root kLiteral (or a union of them) of raw text, not JSON
	// (CompileChoice): no whitespace around it.
	raw bool
	// kInteger with bounds: lo ≤ value ≤ hi, a multiple of mult (> 0); kNumber
	// with bounds: nb.
	bounded bool
	lo, hi  int64
	mult    int64
	nb      *numBounds
	// trail: at the root, how many whitespace bytes may follow the
	// document (0 unless the grammar says otherwise).
	trail uint8
}

type prop struct {
	value    *node
	required bool
}

// Grammar is a compiled schema with its mask cache. It is safe for
// concurrent use.
type Grammar struct {
	root  *node
	nodes int
	cache maskCache
	// initial, when set, is the state before any byte (a GBNF grammar's
	// expanded root); otherwise the root's start.
	initial []config
}

// value is a JSON value with objects' key order kept.
type value struct {
	raw  json.RawMessage // the value's text (for enum and const)
	obj  []member        // when an object
	arr  []value         // when an array
	str  string          // when a string
	num  json.Number     // when a number
	kind byte            // 'o', 'a', 's', 'n', 'b', 'z' (null)
	b    bool
}

type member struct {
	key string
	val value
}

// parseValue decodes one JSON document keeping key order.
func parseValue(data []byte) (value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := readValue(dec, data)
	if err != nil {
		return value{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return value{}, fmt.Errorf("text after the schema")
	}
	return v, nil
}

func readValue(dec *json.Decoder, data []byte) (value, error) {
	start := dec.InputOffset()
	t, err := dec.Token()
	if err != nil {
		return value{}, err
	}
	var v value
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			v.kind = 'o'
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return value{}, err
				}
				k, _ := kt.(string)
				mv, err := readValue(dec, data)
				if err != nil {
					return value{}, err
				}
				v.obj = append(v.obj, member{k, mv})
			}
		case '[':
			v.kind = 'a'
			for dec.More() {
				ev, err := readValue(dec, data)
				if err != nil {
					return value{}, err
				}
				v.arr = append(v.arr, ev)
			}
		}
		if _, err := dec.Token(); err != nil {
			return value{}, err
		}
	case string:
		v.kind, v.str = 's', t
	case json.Number:
		v.kind, v.num = 'n', t
	case bool:
		v.kind, v.b = 'b', t
	case nil:
		v.kind = 'z'
	}
	raw := bytes.TrimSpace(data[start:dec.InputOffset()])
	raw = bytes.TrimLeft(raw, ",: \t\r\n")
	v.raw = raw
	return v, nil
}

func (v value) get(key string) (value, bool) {
	for _, m := range v.obj {
		if m.key == key {
			return m.val, true
		}
	}
	return value{}, false
}

// canonical is v's compact JSON text, the form the model must write for
// enum and const values.
func (v value) canonical() (string, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, v.raw); err != nil {
		return "", err
	}
	if v.kind == 's' { // one spelling: Go's escaping without HTML escapes
		return quoteJSON(v.str), nil
	}
	if v.kind == 'o' || v.kind == 'a' {
		return "", fmt.Errorf("enum and const values must be strings, numbers, booleans or null")
	}
	return buf.String(), nil
}

func quoteJSON(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// SchemaError is a schema Compile cannot enforce; Path is the JSON pointer
// of the offending part ("" for the whole schema).
type SchemaError struct {
	Path string
	Msg  string
}

func (e *SchemaError) Error() string {
	if e.Path == "" {
		return "schema: " + e.Msg
	}
	return "schema " + e.Path + ": " + e.Msg
}

// ignored are annotations that do not constrain output.
var ignored = map[string]bool{
	"title": true, "description": true, "default": true, "examples": true, "$schema": true, "$id": true,
	"$comment": true, "strict": true, "format": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"$defs": true, "definitions": true, "name": true,
}

// narrowing are keywords that only narrow the values a schema accepts
// (bounds, patterns, uniqueness). CompileLoose ignores them: the grammar
// then accepts a superset of the schema, the JSON structure still enforced.
var narrowing = map[string]bool{
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
	"minProperties": true, "maxProperties": true,
	"uniqueItems": true, "contains": true, "minContains": true, "maxContains": true, "propertyNames": true,
	"contentEncoding": true, "contentMediaType": true, "not": true,
}

// compiler holds one Compile's state.
type compiler struct {
	doc   value
	refs  map[string]*node
	nodes int
	loose bool
}

// Compile compiles a JSON Schema (see the package documentation for what is
// enforced). An empty schema, {} or true accepts any JSON value.
func Compile(schema []byte) (*Grammar, error) { return compileSchema(schema, false) }

// CompileLoose is Compile that ignores the keywords that only narrow values
// (minimum, maxLength, pattern, …; see narrowing): for schemas that were not
// written for constrained decoding, such as a tool's parameters, where the
// structure is worth enforcing even when every bound is not. Keywords that
// change the structure are refused as by Compile.
func CompileLoose(schema []byte) (*Grammar, error) { return compileSchema(schema, true) }

func compileSchema(schema []byte, loose bool) (*Grammar, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		schema = []byte("{}")
	}
	doc, err := parseValue(schema)
	if err != nil {
		return nil, &SchemaError{Msg: "not JSON: " + err.Error()}
	}
	c := &compiler{doc: doc, refs: map[string]*node{}, loose: loose}
	root, err := c.compile(doc, "")
	if err != nil {
		return nil, err
	}
	return &Grammar{root: root, nodes: c.nodes}, nil
}

func (c *compiler) newNode(k kind) *node {
	c.nodes++
	return &node{kind: k, id: int32(c.nodes), maxItems: -1, maxLen: -1}
}

func (c *compiler) compile(v value, path string) (*node, error) {
	switch v.kind {
	case 'b':
		if v.b {
			return c.newNode(kAny), nil
		}
		return nil, &SchemaError{path, "false accepts nothing"}
	case 'o':
	default:
		return nil, &SchemaError{path, "a schema must be an object or true"}
	}
	if r, ok := v.get("$ref"); ok {
		return c.ref(r, path)
	}
	for _, m := range v.obj {
		switch m.key {
		case "type", "enum", "const", "anyOf", "oneOf", "allOf", "properties", "required", "additionalProperties",
			"items", "minItems", "maxItems", "nullable", "minLength", "maxLength", "pattern":
		case "multipleOf":
			// Enforced on integers only (a loose compile ignores it
			// elsewhere).
			if !integerOnly(v) && !c.loose {
				return nil, &SchemaError{path + "/" + m.key, "not supported by constrained decoding (enforced on integers only)"}
			}
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			// Enforced on integers and numbers; an untyped value's are not
			// (a loose compile ignores them).
			if _, typed := v.get("type"); !typed && !c.loose {
				return nil, &SchemaError{path + "/" + m.key, "not supported by constrained decoding without a \"type\" (bounds are enforced on integers and numbers)"}
			}
		default:
			if !ignored[m.key] && !(c.loose && narrowing[m.key]) {
				return nil, &SchemaError{path + "/" + m.key, "not supported by constrained decoding"}
			}
		}
	}
	n, err := c.compileBody(v, path)
	if err != nil {
		return nil, err
	}
	if nb, ok := v.get("nullable"); ok && nb.kind == 'b' && nb.b {
		u := c.newNode(kUnion)
		null := c.newNode(kLiteral)
		null.lits = []string{"null"}
		u.alts = []*node{n, null}
		n = u
	}
	return n, nil
}

func (c *compiler) compileBody(v value, path string) (*node, error) {
	if e, ok := v.get("const"); ok {
		s, err := e.canonical()
		if err != nil {
			return nil, &SchemaError{path + "/const", err.Error()}
		}
		n := c.newNode(kLiteral)
		n.lits = []string{s}
		return n, nil
	}
	if e, ok := v.get("enum"); ok {
		if e.kind != 'a' || len(e.arr) == 0 {
			return nil, &SchemaError{path + "/enum", "must be a non-empty array"}
		}
		if len(e.arr) > maxAlternatives {
			return nil, &SchemaError{path + "/enum", fmt.Sprintf("more than %d values", maxAlternatives)}
		}
		n := c.newNode(kLiteral)
		for i, x := range e.arr {
			s, err := x.canonical()
			if err != nil {
				return nil, &SchemaError{path + "/enum/" + strconv.Itoa(i), err.Error()}
			}
			if !slices.Contains(n.lits, s) {
				n.lits = append(n.lits, s)
			}
		}
		return n, nil
	}
	for _, key := range []string{"anyOf", "oneOf", "allOf"} {
		a, ok := v.get(key)
		if !ok {
			continue
		}
		if a.kind != 'a' || len(a.arr) == 0 {
			return nil, &SchemaError{path + "/" + key, "must be a non-empty array"}
		}
		if key == "allOf" {
			if len(a.arr) != 1 {
				return nil, &SchemaError{path + "/allOf", "only an allOf of one schema is supported"}
			}
			return c.compile(a.arr[0], path+"/allOf/0")
		}
		if len(a.arr) > maxAlternatives {
			return nil, &SchemaError{path + "/" + key, fmt.Sprintf("more than %d alternatives", maxAlternatives)}
		}
		u := c.newNode(kUnion)
		for i, x := range a.arr {
			n, err := c.compile(x, path+"/"+key+"/"+strconv.Itoa(i))
			if err != nil {
				return nil, err
			}
			u.alts = append(u.alts, n)
		}
		return u, nil
	}
	t, ok := v.get("type")
	if !ok {
		switch {
		case has(v, "properties") || has(v, "additionalProperties") || has(v, "required"):
			return c.typed("object", v, path)
		case has(v, "items") || has(v, "minItems") || has(v, "maxItems"):
			return c.typed("array", v, path)
		}
		return c.newNode(kAny), nil
	}
	switch t.kind {
	case 's':
		return c.typed(t.str, v, path)
	case 'a':
		if len(t.arr) == 0 {
			return nil, &SchemaError{path + "/type", "an empty list of types accepts nothing"}
		}
		u := c.newNode(kUnion)
		for i, x := range t.arr {
			if x.kind != 's' {
				return nil, &SchemaError{path + "/type/" + strconv.Itoa(i), "must be a type name"}
			}
			n, err := c.typed(x.str, v, path)
			if err != nil {
				return nil, err
			}
			u.alts = append(u.alts, n)
		}
		if len(u.alts) == 1 {
			return u.alts[0], nil
		}
		return u, nil
	}
	return nil, &SchemaError{path + "/type", "must be a type name or a list of them"}
}

func has(v value, key string) bool {
	_, ok := v.get(key)
	return ok
}

func (c *compiler) typed(t string, v value, path string) (*node, error) {
	switch t {
	case "string":
		return c.stringNode(v, path)
	case "number":
		return c.numberNode(v, path)
	case "integer":
		return c.integerNode(v, path)
	case "boolean":
		n := c.newNode(kLiteral)
		n.lits = []string{"true", "false"}
		return n, nil
	case "null":
		n := c.newNode(kLiteral)
		n.lits = []string{"null"}
		return n, nil
	case "object":
		return c.object(v, path)
	case "array":
		return c.array(v, path)
	}
	return nil, &SchemaError{path + "/type", fmt.Sprintf("unknown type %q", t)}
}

// formatPatterns are the string formats enforced (those OpenAI's
// structured outputs list), as patterns in the RFC 3339 / 4122 / 5321 forms
// a model writes.
var formatPatterns = map[string]string{
	"date":      `^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$`,
	"time":      `^([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$`,
	"date-time": `^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt ]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$`,
	"duration":  `^P(\d+Y)?(\d+M)?(\d+W)?(\d+D)?(T(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?$`,
	"email":     `^[A-Za-z0-9.!#$%&'*+/=?^_{|}~-]+@[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$`,
	"hostname":  `^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`,
	"ipv4":      `^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$`,
	"ipv6":      `^[0-9A-Fa-f:.]{2,45}$`,
	"uuid":      `^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$`,
}

// integerNode is an integer with its bounds (minimum, maximum, and the
// exclusive ones, as numbers or, in draft 4, as booleans). A bounded
// integer's magnitude is at most 2⁶³−1.
func (c *compiler) integerNode(v value, path string) (*node, error) {
	n := c.newNode(kInteger)
	n.lo, n.hi = math.MinInt64, math.MaxInt64
	// bound reads a bound as the nearest integer on its side (ceil: a
	// lower bound), and whether it was one already.
	bound := func(key string, ceil bool) (x int64, integral, ok bool, err error) {
		r, ok := v.get(key)
		if !ok || r.kind != 'n' {
			if ok && r.kind != 'b' {
				return 0, false, false, &SchemaError{path + "/" + key, "must be a number"}
			}
			return 0, false, false, nil
		}
		f, perr := strconv.ParseFloat(string(r.num), 64)
		if perr != nil || math.IsInf(f, 0) || math.Abs(f) > 1<<62 {
			return 0, false, false, &SchemaError{path + "/" + key, "must be a number within ±2⁶²"}
		}
		integral = f == math.Trunc(f)
		if i, perr := strconv.ParseInt(string(r.num), 10, 64); perr == nil {
			return i, true, true, nil
		}
		if ceil {
			return int64(math.Ceil(f)), integral, true, nil
		}
		return int64(math.Floor(f)), integral, true, nil
	}
	for _, b := range boundKeys {
		x, integral, ok, err := bound(b.key, b.low)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		excl := b.exclusive(v)
		if excl && integral { // a fractional bound's rounding already excludes it
			if b.low {
				x++
			} else {
				x--
			}
		}
		n.bounded = true
		if b.low {
			n.lo = max(n.lo, x)
		} else {
			n.hi = min(n.hi, x)
		}
	}
	if m, ok := v.get("multipleOf"); ok {
		k, err := strconv.ParseInt(string(m.num), 10, 64)
		if m.kind != 'n' || err != nil || k <= 0 || k > 1<<62 {
			return nil, &SchemaError{path + "/multipleOf", "must be a positive integer within 2⁶² (on integers)"}
		}
		n.bounded, n.mult = true, k
	}
	if n.lo > n.hi || n.mult > 0 && !hasMultiple(n.lo, n.hi, n.mult) {
		return nil, &SchemaError{path, "no integer lies within the bounds"}
	}
	return n, nil
}

// hasMultiple reports whether [a, b] holds a multiple of k (> 0).
func hasMultiple(a, b, k int64) bool {
	if a > b {
		return false
	}
	// The smallest multiple ≥ a (a rounded up to k), unless it would
	// overflow.
	r := a % k
	if r < 0 {
		r += k
	}
	if r == 0 {
		return true
	}
	if a > math.MaxInt64-(k-r) {
		return false
	}
	return a+(k-r) <= b
}

// integerOnly reports whether v's numbers can only be integers: its type
// is "integer", or a list with "integer" and without "number".
func integerOnly(v value) bool {
	t, ok := v.get("type")
	switch {
	case !ok:
		return false
	case t.kind == 's':
		return t.str == "integer"
	case t.kind == 'a':
		hasInt := false
		for _, x := range t.arr {
			if x.str == "number" {
				return false
			}
			hasInt = hasInt || x.str == "integer"
		}
		return hasInt
	}
	return false
}

// boundKeys are the bound keywords: which side each bounds and whether it
// excludes its value.
var boundKeys = []boundKey{{"minimum", true, false}, {"maximum", false, false}, {"exclusiveMinimum", true, true}, {"exclusiveMaximum", false, true}}

type boundKey struct {
	key       string
	low, excl bool
}

// exclusive reports whether the bound excludes its value in v: an
// exclusive* keyword, or draft 4's minimum with exclusiveMinimum true (and
// the same for maximum).
func (b boundKey) exclusive(v value) bool {
	draft4 := func(key string) bool {
		x, ok := v.get(key)
		return ok && x.kind == 'b' && x.b
	}
	return b.excl || (b.key == "minimum" && draft4("exclusiveMinimum")) || (b.key == "maximum" && draft4("exclusiveMaximum"))
}

// numberNode is a number, with its bounds when it has any (decimal.go): a
// bounded number is written without an exponent.
func (c *compiler) numberNode(v value, path string) (*node, error) {
	n := c.newNode(kNumber)
	nb := &numBounds{}
	for _, b := range boundKeys {
		r, ok := v.get(b.key)
		if !ok || r.kind != 'n' {
			if ok && r.kind != 'b' {
				return nil, &SchemaError{path + "/" + b.key, "must be a number"}
			}
			continue
		}
		d, err := parseDec(string(r.num))
		if err == nil && (cmpDec(d, dec{1, maxDecDigits}) >= 0 || cmpDec(d, dec{-1, maxDecDigits}) <= 0) {
			err = fmt.Errorf("beyond ±10^%d, the most a bounded number is written to", maxDecDigits)
		}
		if err != nil {
			return nil, &SchemaError{path + "/" + b.key, err.Error()}
		}
		excl := b.exclusive(v)
		if b.low {
			if c := cmpDec(d, nb.lo); !nb.hasLo || c > 0 || c == 0 && excl {
				nb.lo, nb.loEx, nb.hasLo = d, excl, true
			}
		} else if c := cmpDec(d, nb.hi); !nb.hasHi || c < 0 || c == 0 && excl {
			nb.hi, nb.hiEx, nb.hasHi = d, excl, true
		}
	}
	if !nb.hasLo && !nb.hasHi {
		return n, nil
	}
	if nb.hasLo && nb.hasHi {
		if c := cmpDec(nb.lo, nb.hi); c > 0 || c == 0 && (nb.loEx || nb.hiEx) {
			return nil, &SchemaError{path, "no number lies within the bounds"}
		}
	}
	n.bounded, n.nb = true, nb
	return n, nil
}

// maxStringLen bounds minLength and maxLength (a rune counter's range).
const maxStringLen = 1 << 30

func (c *compiler) stringNode(v value, path string) (*node, error) {
	n := c.newNode(kString)
	for _, k := range []string{"minLength", "maxLength"} {
		x, ok := v.get(k)
		if !ok {
			continue
		}
		i, err := strconv.Atoi(string(x.num))
		if x.kind != 'n' || err != nil || i < 0 || i > maxStringLen {
			return nil, &SchemaError{path + "/" + k, "must be a non-negative integer"}
		}
		if k == "minLength" {
			n.minLen = int32(i)
		} else {
			n.maxLen = int32(i)
		}
	}
	if n.maxLen >= 0 && n.maxLen < n.minLen {
		return nil, &SchemaError{path + "/maxLength", "is below minLength"}
	}
	if f, ok := v.get("format"); ok && f.kind == 's' && !has(v, "pattern") {
		// A format is an annotation in JSON Schema; the common ones are
		// enforced as their patterns (a string with both keeps the pattern).
		if p, ok := formatPatterns[f.str]; ok {
			rx, err := compileRegex(p, false)
			if err != nil {
				panic(err) // the table's patterns compile
			}
			n.rx = rx
		}
	}
	if p, ok := v.get("pattern"); ok {
		if p.kind != 's' {
			return nil, &SchemaError{path + "/pattern", "must be a string"}
		}
		rx, err := compileRegex(p.str, false)
		switch {
		case err == nil:
			n.rx = rx
		case !c.loose:
			return nil, &SchemaError{path + "/pattern", err.Error()}
		}
	}
	return n, nil
}

func (c *compiler) object(v value, path string) (*node, error) {
	n := c.newNode(kObject)
	props, hasProps := v.get("properties")
	if hasProps && (props.kind != 'o' || len(props.obj) == 0) {
		hasProps = false // {} properties: any keys, as without them
		if props.kind != 'o' {
			return nil, &SchemaError{path + "/properties", "must be an object"}
		}
	}
	if !hasProps {
		if r, ok := v.get("required"); ok && r.kind == 'a' && len(r.arr) > 0 {
			return nil, &SchemaError{path + "/required", "required properties need \"properties\""}
		}
		n.extra = c.newNode(kAny)
		if ap, ok := v.get("additionalProperties"); ok {
			if ap.kind == 'b' && !ap.b {
				n.extra = nil // only {}
			} else {
				x, err := c.compile(ap, path+"/additionalProperties")
				if err != nil {
					return nil, err
				}
				n.extra = x
			}
		}
		return n, nil
	}
	if len(props.obj) > maxAlternatives {
		return nil, &SchemaError{path + "/properties", fmt.Sprintf("more than %d properties", maxAlternatives)}
	}
	required := map[string]bool{}
	if r, ok := v.get("required"); ok {
		if r.kind != 'a' {
			return nil, &SchemaError{path + "/required", "must be an array of property names"}
		}
		for i, x := range r.arr {
			if x.kind != 's' {
				return nil, &SchemaError{path + "/required/" + strconv.Itoa(i), "must be a property name"}
			}
			if _, ok := props.get(x.str); !ok {
				return nil, &SchemaError{path + "/required/" + strconv.Itoa(i), fmt.Sprintf("%q is not in properties", x.str)}
			}
			required[x.str] = true
		}
	}
	for _, m := range props.obj {
		if slices.Contains(n.keys, quoteJSON(m.key)) {
			return nil, &SchemaError{path + "/properties", fmt.Sprintf("property %q twice", m.key)}
		}
		pv, err := c.compile(m.val, path+"/properties/"+escapePointer(m.key))
		if err != nil {
			return nil, err
		}
		n.props = append(n.props, prop{value: pv, required: required[m.key]})
		n.keys = append(n.keys, quoteJSON(m.key))
	}
	n.reqFrom = make([]bool, len(n.props)+1)
	for i := len(n.props) - 1; i >= 0; i-- {
		n.reqFrom[i] = n.reqFrom[i+1] || n.props[i].required
	}
	return n, nil
}

func (c *compiler) array(v value, path string) (*node, error) {
	if has(v, "prefixItems") {
		return nil, &SchemaError{path + "/prefixItems", "not supported by constrained decoding"}
	}
	n := c.newNode(kArray)
	n.items = c.newNode(kAny)
	if it, ok := v.get("items"); ok {
		x, err := c.compile(it, path+"/items")
		if err != nil {
			return nil, err
		}
		n.items = x
	}
	for _, k := range []string{"minItems", "maxItems"} {
		x, ok := v.get(k)
		if !ok {
			continue
		}
		i, err := strconv.Atoi(string(x.num))
		if x.kind != 'n' || err != nil || i < 0 {
			return nil, &SchemaError{path + "/" + k, "must be a non-negative integer"}
		}
		if k == "minItems" {
			n.minItems = i
		} else {
			n.maxItems = i
		}
	}
	if n.maxItems >= 0 && n.maxItems < n.minItems {
		return nil, &SchemaError{path + "/maxItems", "is below minItems"}
	}
	return n, nil
}

// ref resolves a local reference; references compile once, so recursive
// schemas make cyclic graphs.
func (c *compiler) ref(r value, path string) (*node, error) {
	if r.kind != 's' || !strings.HasPrefix(r.str, "#") {
		return nil, &SchemaError{path + "/$ref", "only local references (#, #/$defs/…) are supported"}
	}
	if n, ok := c.refs[r.str]; ok {
		return n, nil
	}
	target := c.doc
	if r.str != "#" {
		parts := strings.Split(strings.TrimPrefix(r.str, "#/"), "/")
		for _, p := range parts {
			p = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
			next, ok := target.get(p)
			if !ok {
				return nil, &SchemaError{path + "/$ref", fmt.Sprintf("%q does not resolve", r.str)}
			}
			target = next
		}
	}
	// A placeholder union of one member breaks the cycle: the reference's
	// node exists before its body compiles.
	ph := c.newNode(kUnion)
	c.refs[r.str] = ph
	body, err := c.compile(target, r.str)
	if err != nil {
		return nil, err
	}
	ph.alts = []*node{body}
	return ph, nil
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
