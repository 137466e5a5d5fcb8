//go:build !unix

package mmap

import "os"

// Without mmap the file is read once into memory.
func Map(path string) ([]byte, error) { return os.ReadFile(path) }

func Unmap([]byte) error { return nil }
