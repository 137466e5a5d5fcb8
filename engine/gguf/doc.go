// Package gguf reads and writes GGUF files, llama.cpp's single-file model
// format: a header of typed metadata, tensor descriptions, and tensor data
// (plain or block-quantized) through a read-only memory map.
//
// Contract:
//   - Parse and Open never panic on malformed input: every inconsistency
//     (bad magic or version, a string or array running past the end, an
//     unknown value or tensor type, a tensor whose bytes fall outside the
//     data section or overlap the header) is an error naming the key or
//     tensor. Counts are bounded by the bytes present before anything is
//     allocated.
//   - Tensor.Data aliases the file's map and must not be written; it is
//     valid until File.Close.
//   - Dims are in GGUF order: Dims[0] is the contiguous (fastest) axis, so a
//     Hugging Face weight of shape [out, in] is stored with Dims [in, out].
//   - Dequantize turns any supported type into float32 exactly as ggml's
//     reference (dequantize_row_*) does; Quantize writes blocks of the same
//     layouts with plain round-to-nearest scales (valid blocks that ggml
//     reads, not llama.cpp's error-minimising search).
package gguf
