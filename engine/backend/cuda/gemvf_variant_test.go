package cuda

import (
	"reflect"
	"testing"
)

func TestParseGemvfVariant(t *testing.T) {
	cases := []struct {
		in   string
		defs []string
		rw   int
		name string
		bad  bool
	}{
		{in: "", rw: 2, name: "default"},
		{in: "GF_RW=2 GF_U=2", rw: 2, name: "default"},
		{in: "GF_RW=1", defs: []string{"GF_RW=1"}, rw: 1, name: "rw1"},
		{in: "GF_U=8,GF_RW=1", defs: []string{"GF_RW=1", "GF_U=8"}, rw: 1, name: "rw1_u8"},
		{in: " GF_U=4 ", defs: []string{"GF_U=4"}, rw: 2, name: "u4"},
		{in: "GF_RW=3", rw: 2, bad: true},
		{in: "GF_U=17", rw: 2, bad: true},
		{in: "GF_RW=1 GF_UR=16", defs: []string{"GF_RW=1", "GF_UR=16"}, rw: 1, name: "rw1_ur16"},
		{in: "GF_U=8 GF_UR=8", defs: []string{"GF_U=8"}, rw: 2, name: "u8"},
		{in: "GF_UR=2", rw: 2, name: "default"},
		{in: "GF_U=4 GF_UR=2", defs: []string{"GF_U=4", "GF_UR=2"}, rw: 2, name: "u4_ur2"},
		{in: "GF_UR=4", defs: []string{"GF_UR=4"}, rw: 2, name: "ur4"},
		{in: "GF_PIPE=1", defs: []string{"GF_PIPE=1"}, rw: 2, name: "pipe1"},
		{in: "GF_U", rw: 2, bad: true},
		{in: "GW_WARPS=4", rw: 2, bad: true},
	}
	for _, c := range cases {
		v, err := parseGemvfVariant(c.in)
		if (err != nil) != c.bad {
			t.Errorf("%q: error %v, want bad=%v", c.in, err, c.bad)
			continue
		}
		if !reflect.DeepEqual(v.defs, c.defs) || v.rw != c.rw {
			t.Errorf("%q: defs %q rw %d, want %q rw %d", c.in, v.defs, v.rw, c.defs, c.rw)
		}
		if !c.bad && v.name() != c.name {
			t.Errorf("%q: name %q, want %q", c.in, v.name(), c.name)
		}
	}
}
