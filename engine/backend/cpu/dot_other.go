//go:build !amd64

package cpu

func dot(a, b []float32) float32              { return dotGeneric(a, b) }
func dotBF16(a []uint16, b []float32) float32 { return dotBF16Generic(a, b) }
func dotF16(a []uint16, b []float32) float32  { return dotF16Generic(a, b) }
func dotQ8_0(a []byte, b []float32) float32   { return dotQ8_0Generic(a, b) }
