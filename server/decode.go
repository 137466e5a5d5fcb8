package server

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/tidwall/gjson"
)

// Helpers that read one typed field of a JSON request with gjson and answer
// a 400 naming the field when it has the wrong type. JSON null counts as
// absent everywhere, as in OpenAI's API.

// parseBody checks the body is one JSON object.
func parseBody(body string) (gjson.Result, *APIError) {
	if len(body) == 0 {
		return gjson.Result{}, badRequest("", "the request body is empty: send a JSON object")
	}
	if !gjson.Valid(body) {
		return gjson.Result{}, badRequest("", "the request body is not valid JSON")
	}
	root := gjson.Parse(body)
	if !root.IsObject() {
		return gjson.Result{}, badRequest("", "the request body must be a JSON object")
	}
	return root, nil
}

// fields indexes an object's members by key, without gjson path syntax
// (keys may hold '.', '*' or '?'); the last duplicate wins, like
// json.Unmarshal. Built once per object so that reading many fields of a
// large body scans it once.
type fields map[string]gjson.Result

func fieldsOf(obj gjson.Result) fields {
	f := fields{}
	obj.ForEach(func(k, v gjson.Result) bool {
		f[k.Str] = v
		return true
	})
	return f
}

func present(r gjson.Result) bool { return r.Exists() && r.Type != gjson.Null }

func optBool(obj fields, key, param string) (v, set bool, err *APIError) {
	r := obj[key]
	if !present(r) {
		return false, false, nil
	}
	if !r.IsBool() {
		return false, false, fieldError(param, "must be a boolean (true or false)")
	}
	return r.Bool(), true, nil
}

func optString(obj fields, key, param string) (v string, set bool, err *APIError) {
	r := obj[key]
	if !present(r) {
		return "", false, nil
	}
	if r.Type != gjson.String {
		return "", false, fieldError(param, "must be a string")
	}
	return r.Str, true, nil
}

func optFloat(obj fields, key, param string) (v float64, set bool, err *APIError) {
	r := obj[key]
	if !present(r) {
		return 0, false, nil
	}
	if r.Type != gjson.Number || math.IsInf(r.Num, 0) {
		return 0, false, fieldError(param, "must be a number")
	}
	return r.Num, true, nil
}

// optInt accepts integral JSON numbers (10, 1e3, 10.0) in [lo, hi].
func optInt(obj fields, key, param string, lo, hi int64) (v int64, set bool, err *APIError) {
	r := obj[key]
	if !present(r) {
		return 0, false, nil
	}
	v, e := asInt(r, param, lo, hi)
	return v, e == nil, e
}

func asInt(r gjson.Result, param string, lo, hi int64) (int64, *APIError) {
	if r.Type != gjson.Number {
		return 0, fieldError(param, "must be an integer")
	}
	// Big integers lose precision in Num; parse the literal when it is one.
	if v, err := strconv.ParseInt(r.Raw, 10, 64); err == nil {
		if v < lo || v > hi {
			return 0, rangeError(param, lo, hi, r.Raw)
		}
		return v, nil
	}
	if r.Num != math.Trunc(r.Num) || math.IsInf(r.Num, 0) {
		return 0, fieldError(param, "must be an integer, got %s", r.Raw)
	}
	if r.Num < float64(lo) || r.Num > float64(hi) {
		return 0, rangeError(param, lo, hi, r.Raw)
	}
	return int64(r.Num), nil
}

func rangeError(param string, lo, hi int64, got string) *APIError {
	switch {
	case hi == math.MaxInt32 || hi == math.MaxInt64:
		return fieldError(param, "must be an integer >= %d, got %s", lo, got)
	default:
		return fieldError(param, "must be an integer in [%d, %d], got %s", lo, hi, got)
	}
}

// tokenIDs reads an array of token ids below vocab.
func tokenIDs(r gjson.Result, param string, vocab int) ([]int32, *APIError) {
	if !r.IsArray() {
		return nil, fieldError(param, "must be an array of token ids")
	}
	var ids []int32
	var err *APIError
	i := 0
	r.ForEach(func(_, v gjson.Result) bool {
		p := param + "[" + strconv.Itoa(i) + "]"
		var id int64
		if id, err = asInt(v, p, 0, int64(vocab)-1); err != nil {
			if v.Type == gjson.Number && v.Num == math.Trunc(v.Num) {
				err = badRequest(p, "%s: token id %s is outside the vocabulary (size %d)", p, v.Raw, vocab)
			}
			return false
		}
		ids = append(ids, int32(id))
		i++
		return true
	})
	return ids, err
}

// rawObject returns a JSON object member as raw JSON (nil when absent).
func rawObject(obj fields, key, param string) (json.RawMessage, *APIError) {
	r := obj[key]
	if !present(r) {
		return nil, nil
	}
	if !r.IsObject() {
		return nil, fieldError(param, "must be an object")
	}
	return json.RawMessage(r.Raw), nil
}
