//go:build unix

// Package mmap maps files read-only: model readers hand out tensor bytes
// that alias the map, so gigabytes are never copied at load.
package mmap

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Map maps path read-only; an empty file gives an empty slice.
func Map(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() == 0 {
		return []byte{}, nil
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return data, nil
}

// Unmap releases a slice Map returned.
func Unmap(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return unix.Munmap(b)
}
