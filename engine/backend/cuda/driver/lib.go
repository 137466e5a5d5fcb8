// Package driver binds the parts of the CUDA driver API (libcuda), NVRTC and
// cuBLASLt that the CUDA backend uses, without cgo: the libraries are opened
// at run time with purego and every call's status becomes a Go error that
// names the call.
//
// Nothing here is safe for concurrent use: the caller (the backend) owns the
// device from one goroutine and makes its context current on the calling OS
// thread before any call that needs one.
package driver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ebitengine/purego"
)

// library is an opened shared object.
type library struct {
	name   string
	path   string // what dlopen was given
	handle uintptr
}

// searchDirs lists directories where CUDA libraries live when they are not on
// the loader's path: LD_LIBRARY_PATH entries (dlopen reads it too, but a
// versioned name can only be found by listing), the toolkit's usual places
// and the lib directories of Python's nvidia-* wheels (torch installs them).
func searchDirs() []string {
	var dirs []string
	for _, d := range strings.Split(os.Getenv("LD_LIBRARY_PATH"), ":") {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	if h := os.Getenv("CUDA_HOME"); h != "" {
		dirs = append(dirs, filepath.Join(h, "lib64"), filepath.Join(h, "lib"))
	}
	if h := os.Getenv("CUDA_PATH"); h != "" {
		dirs = append(dirs, filepath.Join(h, "lib64"), filepath.Join(h, "lib"))
	}
	dirs = append(dirs, "/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
		"/usr/local/cuda/targets/sbsa-linux/lib", "/usr/local/nvidia/lib64", "/usr/lib/x86_64-linux-gnu",
		"/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib/wsl/lib")
	if m, _ := filepath.Glob("/usr/local/cuda-*/lib64"); len(m) > 0 {
		sort.Sort(sort.Reverse(sort.StringSlice(m)))
		dirs = append(dirs, m...)
	}
	for _, pat := range []string{
		"/opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib",
		"/opt/*/.venv/lib/python3*/site-packages/nvidia/cu*/lib",
		"/usr/local/lib/python3*/dist-packages/nvidia/*/lib",
		"/usr/local/lib/python3*/site-packages/nvidia/*/lib",
		"/usr/lib/python3*/site-packages/nvidia/*/lib",
		"/usr/local/lib/python3*/dist-packages/nvidia/cu*/lib",
	} {
		m, _ := filepath.Glob(pat)
		dirs = append(dirs, m...)
	}
	if home, err := os.UserHomeDir(); err == nil {
		m, _ := filepath.Glob(filepath.Join(home, ".local/lib/python3*/site-packages/nvidia/*/lib"))
		dirs = append(dirs, m...)
	}
	return dirs
}

// open tries plain sonames first (the loader's own search: LD_LIBRARY_PATH,
// the ld.so cache), then every file matching one of the glob patterns in the
// search directories, newest version first. preload names companion
// libraries (NVRTC's builtins) to open from the same directory first so that
// the library's own dlopen of them finds them.
func open(what string, sonames, patterns, preload []string) (*library, error) {
	var tried []string
	for _, n := range sonames {
		h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			return &library{name: what, path: n, handle: h}, nil
		}
		tried = append(tried, n)
	}
	seen := map[string]bool{}
	for _, d := range searchDirs() {
		if seen[d] {
			continue
		}
		seen[d] = true
		var files []string
		for _, p := range patterns {
			m, _ := filepath.Glob(filepath.Join(d, p))
			files = append(files, m...)
		}
		sort.Sort(sort.Reverse(sort.StringSlice(files)))
		for _, f := range files {
			for _, p := range preload {
				if m, _ := filepath.Glob(filepath.Join(d, p)); len(m) > 0 {
					sort.Sort(sort.Reverse(sort.StringSlice(m)))
					purego.Dlopen(m[0], purego.RTLD_NOW|purego.RTLD_GLOBAL) //nolint:errcheck // best effort
				}
			}
			h, err := purego.Dlopen(f, purego.RTLD_NOW|purego.RTLD_GLOBAL)
			if err == nil {
				return &library{name: what, path: f, handle: h}, nil
			}
			tried = append(tried, f+" ("+err.Error()+")")
		}
	}
	return nil, fmt.Errorf("%s not found (tried %s; set LD_LIBRARY_PATH to the CUDA lib directory)", what, strings.Join(tried, ", "))
}

// syms resolves every name into the matching *uintptr, reporting all missing
// symbols at once.
func (l *library) syms(table map[string]*uintptr) error {
	var missing []string
	for name, dst := range table {
		p, err := purego.Dlsym(l.handle, name)
		if err != nil || p == 0 {
			missing = append(missing, name)
			continue
		}
		*dst = p
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("%s (%s) lacks %s", l.name, l.path, strings.Join(missing, ", "))
	}
	return nil
}

// optSym resolves a symbol that may be missing (0 then).
func (l *library) optSym(name string) uintptr {
	p, err := purego.Dlsym(l.handle, name)
	if err != nil {
		return 0
	}
	return p
}

// ErrNotAvailable wraps every failure to find or initialise a library, so
// that callers can fall back to the CPU.
var ErrNotAvailable = errors.New("CUDA not available")

type unavailable struct{ err error }

func (u unavailable) Error() string { return u.err.Error() }
func (u unavailable) Unwrap() error { return ErrNotAvailable }

func notAvailable(err error) error { return unavailable{err} }
