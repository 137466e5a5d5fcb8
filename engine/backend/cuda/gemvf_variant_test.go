package cuda

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseGemvfVariant(t *testing.T) {
	cases := []struct {
		in   string
		defs []string
		rw   int
		name string
		bad  bool
		smem int
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
		{in: "GF_KS=4", defs: []string{"GF_KS=4"}, rw: 2, name: "ks4"},
		{in: "GF_KS=2 GF_KSR=4", defs: []string{"GF_KSR=4"}, rw: 2, name: "ksr4"},
		{in: "GF_KS=2", rw: 2, name: "default"},
		{in: "GF_KS=1", defs: []string{"GF_KS=1"}, rw: 2, name: "ks1"},
		{in: "GF_KS=1 GF_KSR=2", defs: []string{"GF_KS=1", "GF_KSR=2"}, rw: 2, name: "ks1_ksr2"},
		{in: "GF_KSS=2 GF_MINB=6", defs: []string{"GF_KSS=2"}, rw: 2, name: "kss2"},
		{in: "GF_KSS=1 GF_MINB=1", defs: []string{"GF_MINB=1"}, rw: 2, name: "minb1"},
		{in: "GF_MINB=9", rw: 2, bad: true},
		{in: "GF_KS=4 GF_KSR=4", defs: []string{"GF_KS=4"}, rw: 2, name: "ks4"},
		{in: "PDL_TRIGGER=1", defs: []string{"PDL_TRIGGER=1"}, rw: 2, name: "pdl_trigger1"},
		{in: "GF_U=4 PDL_TRIGGER=0", defs: []string{"GF_U=4", "PDL_TRIGGER=0"}, rw: 2, name: "u4_pdl_trigger0"},
		{in: "PDL_TRIGGER=3", rw: 2, bad: true},
		{in: "GF_L2PF=1 PDL_TRIGGER=1", defs: []string{"GF_L2PF=1", "PDL_TRIGGER=1"}, rw: 2, name: "l2pf1_pdl_trigger1"},
		{in: "GF_L2PF=0", rw: 2, name: "default"},
		{in: "GF_L2PF=2", rw: 2, bad: true},
		{in: "GF_TMA=1", defs: []string{"GF_TMA=1"}, rw: 2, name: "tma1", smem: 4 * 16 * 512 * 2},
		{in: "GF_TMA=1 GF_TS=3 GF_TC=1024", defs: []string{"GF_TMA=1", "GF_TS=3", "GF_TC=1024"}, rw: 2, name: "tma1_ts3_tc1024", smem: 3 * 16 * 1024 * 2},
		{in: "GF_TS=4 GF_TC=512 GF_TMA=1", defs: []string{"GF_TMA=1"}, rw: 2, name: "tma1", smem: 4 * 16 * 512 * 2},
		{in: "GF_TMA=0", rw: 2, name: "default"},
		{in: "GF_TS=3", rw: 2, bad: true},
		{in: "GF_TMA=1 GF_TC=300", rw: 2, bad: true},
		{in: "GF_TMA=1 GF_TS=1", rw: 2, bad: true},
		{in: "GF_DYN=1", rw: 2, bad: true},
		{in: "GF_KS=3", rw: 2, bad: true},
		{in: "GF_U", rw: 2, bad: true},
		{in: "GW_WARPS=4", rw: 2, bad: true},
	}
	for _, c := range cases {
		v, err := parseGemvfVariant(c.in)
		if (err != nil) != c.bad {
			t.Errorf("%q: error %v, want bad=%v", c.in, err, c.bad)
			continue
		}
		if !reflect.DeepEqual(v.defs, c.defs) || v.rw != c.rw || v.smem != c.smem {
			t.Errorf("%q: defs %q rw %d smem %d, want %q rw %d smem %d", c.in, v.defs, v.rw, v.smem, c.defs, c.rw, c.smem)
		}
		if !c.bad && v.name() != c.name {
			t.Errorf("%q: name %q, want %q", c.in, v.name(), c.name)
		}
	}
}

func TestGemvfRowsPerBlock(t *testing.T) {
	for _, c := range []struct {
		spec                 string
		multi, swiglu, resid int
		splitM, splitR       bool
	}{
		{"", 8, 8, 8, true, true},
		{"GF_KS=1", 16, 8, 16, false, false},
		{"GF_RW=1", 4, 8, 4, true, true},
		{"GF_RW=1 GF_KS=1", 8, 8, 8, false, false},
		{"GF_KS=4", 4, 8, 4, true, true},
		{"GF_KSR=4", 8, 8, 4, true, true},
		{"GF_KS=1 GF_KSR=4", 16, 8, 4, false, true},
		{"GF_KSS=2", 8, 4, 8, true, true},
		{"GF_KS=2 GF_KSR=8", 8, 8, 2, true, true},
		{"GF_KS=8 GF_RW=1", 1, 8, 1, true, true},
	} {
		v, err := parseGemvfVariant(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		if m, s, r := v.rowsPerBlock(epiNone), v.rowsPerBlock(epiSwiGLU), v.rowsPerBlock(epiResid); m != c.multi || s != c.swiglu || r != c.resid {
			t.Errorf("%q: rows per block %d/%d/%d, want %d/%d/%d", c.spec, m, s, r, c.multi, c.swiglu, c.resid)
		}
		if v.splitsK(epiNone) != c.splitM || v.splitsK(epiResid) != c.splitR || v.splitsK(epiSwiGLU) != (c.swiglu < 8) {
			t.Errorf("%q: splitsK %v/%v/%v", c.spec, v.splitsK(epiNone), v.splitsK(epiSwiGLU), v.splitsK(epiResid))
		}
	}
}

// TestSplitDefines: the fused products' shape defines in
// INFERNIX_CUDA_DEFINES go to the variant the host sizes its grids from;
// the others to every module; malformed ones are reported.
func TestSplitDefines(t *testing.T) {
	cases := []struct {
		in                  string
		global, shapes, bad []string
	}{
		{in: ""},
		{in: "GF_XSH=1", global: []string{"GF_XSH=1"}},
		{in: "GF_KSS=2", shapes: []string{"GF_KSS=2"}},
		{in: "GF_XSH=1,GF_KSS=2 KEEP_META=2", global: []string{"GF_XSH=1", "KEEP_META=2"}, shapes: []string{"GF_KSS=2"}},
		{in: "GF_RW=1 GF_KS=1 GF_KSR=4 GF_TMA=1 GF_TS=3 GF_TC=1024 GF_U=4", global: []string{"GF_U=4"},
			shapes: []string{"GF_RW=1", "GF_KS=1", "GF_KSR=4", "GF_TMA=1", "GF_TS=3", "GF_TC=1024"}},
		{in: "1X=2 STEP_TIMING", global: []string{"STEP_TIMING"}, bad: []string{"1X=2"}},
	}
	for _, c := range cases {
		global, shapes, bad := splitDefines(c.in)
		if !reflect.DeepEqual(global, c.global) || !reflect.DeepEqual(shapes, c.shapes) || !reflect.DeepEqual(bad, c.bad) {
			t.Errorf("%q: global %q shapes %q bad %q, want %q %q %q", c.in, global, shapes, bad, c.global, c.shapes, c.bad)
		}
		// What the host parses: the shapes form a valid variant that
		// changes the fused products' rows per block where they say so.
		if v, err := parseGemvfVariant(strings.Join(shapes, " ")); err != nil {
			t.Errorf("%q: the shapes %q do not parse: %v", c.in, shapes, err)
		} else if c.in == "GF_KSS=2" && v.rowsPerBlock(epiSwiGLU) != gemvfWarps/2 {
			t.Errorf("GF_KSS=2: gate|up blocks compute %d outputs, want %d", v.rowsPerBlock(epiSwiGLU), gemvfWarps/2)
		}
	}
}
