// Package kernels holds the CUDA C sources of the CUDA backend. They are
// embedded in the binary and compiled at run time by NVRTC for the device
// that is present (nothing is compiled at go build time); the backend caches
// the compiled images on disk.
package kernels

import (
	"embed"
	"fmt"
)

//go:embed *.cu *.cuh
var files embed.FS

// Prelude is prepended to every module.
const preludeName = "prelude.cuh"

// Modules lists the compilable sources (each is one CUDA module).
var Modules = []string{"elementwise.cu", "gemv.cu", "attention.cu", "prefill.cu", "sample.cu"}

// Source returns the prelude and the named module as one translation unit,
// with #line directives so that compiler messages name the right file.
func Source(name string) (string, error) {
	pre, err := files.ReadFile(preludeName)
	if err != nil {
		return "", err
	}
	body, err := files.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("kernels: no module %q", name)
	}
	return fmt.Sprintf("#line 1 %q\n%s\n#line 1 %q\n%s", preludeName, pre, name, body), nil
}
