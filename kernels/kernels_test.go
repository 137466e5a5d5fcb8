package kernels

import (
	"strings"
	"testing"
)

func TestSources(t *testing.T) {
	for _, m := range Modules {
		src, err := Source(m)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(src, `#line 1 "prelude.cuh"`) || !strings.Contains(src, `#line 1 "flash.cuh"`) || !strings.Contains(src, `#line 1 "`+m+`"`) {
			t.Errorf("%s: missing #line markers", m)
		}
		if !strings.Contains(src, "extern \"C\" __global__") {
			t.Errorf("%s: no kernels", m)
		}
	}
	if _, err := Source("missing.cu"); err == nil {
		t.Error("Source of a missing module succeeded")
	}
}
