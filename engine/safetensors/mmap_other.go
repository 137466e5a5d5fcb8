//go:build !unix

package safetensors

import "os"

// Without mmap the file is read once into memory.
func mapFile(path string) ([]byte, error) { return os.ReadFile(path) }

func unmapFile([]byte) error { return nil }
