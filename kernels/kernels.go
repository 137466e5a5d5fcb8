// Package kernels holds the CUDA C sources of the CUDA backend. They are
// embedded in the binary and compiled at run time by NVRTC for the device
// that is present (nothing is compiled at go build time); the backend caches
// the compiled images on disk.
package kernels

import (
	"embed"
	"fmt"
	"strings"
)

//go:embed *.cu *.cuh
var files embed.FS

// The preludes are prepended to every module: prelude.cuh, then flash.cuh
// and route.cuh (plain C++ that the tests' CPU emulation compiles too).
var preludeNames = []string{"prelude.cuh", "flash.cuh", "route.cuh"}

// Modules lists the compilable sources (each is one CUDA module).
var Modules = []string{"elementwise.cu", "gemv.cu", "attention.cu", "prefill.cu", "sample.cu", "pchain.cu", "recurrent.cu", "moe.cu", "probe.cu", "mlp.cu"}

// Source returns the preludes and the named module as one translation
// unit, with #line directives so that compiler messages name the right file.
func Source(name string) (string, error) {
	body, err := files.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("kernels: no module %q", name)
	}
	var b strings.Builder
	for _, p := range preludeNames {
		pre, err := files.ReadFile(p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "#line 1 %q\n%s\n", p, pre)
	}
	fmt.Fprintf(&b, "#line 1 %q\n%s", name, body)
	return b.String(), nil
}
