package server

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/infernix/infernix/engine/toolcall"
)

// TestReleaseEdits: the held outputs are sent unchanged without an edit;
// an edited content replaces the content outputs in place (reasoning kept,
// their logprobs carried), replaced calls come after it with new ids, and
// /v1/completions (noCalls) ignores call edits. A failed send cancels.
func TestReleaseEdits(t *testing.T) {
	lp := func(id int32) []tokenLogprob { return []tokenLogprob{{id: id}} }
	held := func() []heldOutput {
		return []heldOutput{
			{kind: outReasoning, text: "think", logprobs: lp(1)},
			{kind: outContent, text: "he", logprobs: lp(2)},
			{kind: outContent, text: "llo", logprobs: lp(3)},
			{kind: outCallStart, index: 0, id: "call_a", name: "f", logprobs: lp(4)},
			{kind: outCallArgs, index: 0, text: `{"x":1}`},
		}
	}
	str := func(s string) *string { return &s }
	cases := []struct {
		name    string
		ed      *ResponseEdit
		noCalls bool
		want    string
		tail    int
	}{
		{"none", nil, false, `R:think[1] C:he[2] C:llo[3] S0:f:call_a[4] A0:{"x":1}`, 0},
		{"tags only", &ResponseEdit{Tags: map[string]string{"a": "b"}}, false, `R:think[1] C:he[2] C:llo[3] S0:f:call_a[4] A0:{"x":1}`, 0},
		{"content", &ResponseEdit{Content: str("bye")}, false, `R:think[1] C:bye[2 3] S0:f:call_a[4] A0:{"x":1}`, 0},
		{"empty content", &ResponseEdit{Content: str("")}, false, `R:think[1] S0:f:call_a[4] A0:{"x":1}`, 2},
		{"calls", &ResponseEdit{ReplaceCalls: true, ToolCalls: nil}, false, `R:think[1] C:he[2] C:llo[3]`, 1},
		{"both", &ResponseEdit{Content: str("x"), ReplaceCalls: true, ToolCalls: []toolcall.Call{{Name: "g", Arguments: "{}"}, {Name: "h", Arguments: `{"y":2}`}}}, false,
			`R:think[1] C:x[2 3] S0:g:new A0:{} S1:h:new A1:{"y":2}`, 1},
		{"completions", &ResponseEdit{Content: str("x"), ReplaceCalls: true}, true, `R:think[1] C:x[2 3] S0:f:call_a[4] A0:{"x":1}`, 0},
	}
	for _, c := range cases {
		var got []string
		jh := &jobHooks{held: held(), noCalls: c.noCalls, emit: func(o *output) error {
			ids := make([]string, len(o.logprobs))
			for i, l := range o.logprobs {
				ids[i] = fmt.Sprint(l.id)
			}
			lps := ""
			if len(ids) > 0 {
				lps = "[" + strings.Join(ids, " ") + "]"
			}
			switch o.kind {
			case outReasoning:
				got = append(got, "R:"+o.text+lps)
			case outContent:
				got = append(got, "C:"+o.text+lps)
			case outCallStart:
				id := o.id
				if id != "call_a" && strings.HasPrefix(id, "call_") {
					id = "new"
				}
				got = append(got, fmt.Sprintf("S%d:%s:%s%s", o.index, o.name, id, lps))
			case outCallArgs:
				got = append(got, fmt.Sprintf("A%d:%s%s", o.index, o.text, lps))
			}
			return nil
		}}
		res := &result{finish: "tool_calls"}
		(&Server{}).release(jh, c.ed, res)
		if s := strings.Join(got, " "); s != c.want || len(res.tailLogprobs) != c.tail {
			t.Errorf("%s: sent %s (tail %d)\n want %s (tail %d)", c.name, s, len(res.tailLogprobs), c.want, c.tail)
		}
	}

	n := 0
	jh := &jobHooks{held: held(), emit: func(*output) error {
		if n++; n == 2 {
			return errors.New("gone")
		}
		return nil
	}}
	res := &result{finish: "stop"}
	(&Server{}).release(jh, nil, res)
	if n != 2 || res.finish != "cancelled" || res.writeErr == nil {
		t.Errorf("failed send: %d sends, finish %s, writeErr %v", n, res.finish, res.writeErr)
	}
}
