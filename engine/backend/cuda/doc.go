// Package cuda is the GPU backend: the operators of backend.Backend as CUDA
// kernels (kernels/*.cu, compiled by NVRTC at run time for the device's
// architecture and cached on disk), matrix products through cuBLASLt for
// prefill and a bandwidth-bound kernel for decode, a paged bf16 (or f16) KV
// cache, and decode steps replayed as CUDA graphs. The binary stays CGO-free: libcuda,
// libnvrtc and libcublasLt are opened with purego (package driver).
//
// # Threads
//
// A CUDA context is current per OS thread. The driver package owns one OS
// thread for the device (a goroutine locked to it for the life of the
// process): New makes the device's primary context current there, and every
// libcuda and cuBLASLt call runs on that thread. A caller on another thread
// hands the call over and waits (about 30 µs on the H200 machine), so
// results never depend on which goroutine calls; calls must still not
// overlap (the backend.Backend contract: one goroutine at a time). The
// scheduler can run its loop on the device thread itself with
// RunOnDeviceThread (backend.DeviceThreadRunner) and pay no hand-over.
// (Calling the driver directly from whichever thread the caller was on,
// with the context made current there, failed on the H200 machine:
// cuMemcpyHtoDAsync returned CUDA_ERROR_INVALID_VALUE for calls from
// goroutines other than the one that created the context. The cause was not
// found; one owning thread removed it.)
//
// # Errors
//
// Shape and contract violations panic, as in the CPU backend. A failing
// CUDA, NVRTC or cuBLASLt call is turned into an error naming the call; the
// first one is kept (Err), later operators are skipped, and ReadRows fills
// its destination with NaN so that no stale logits pass for results. Callers
// check the optional backend.Checker interface after a forward pass.
//
// # Graphs
//
// The backend records every operator as a list of low-level records (kernel
// launch with its arguments, copy, cuBLASLt product). Per-forward metadata
// (token ids, positions, block tables) is staged in a pinned host arena and
// copied to a device arena by records of the same list, so kernels read it
// through fixed addresses. A forward begins at Embed and ends at ReadRows.
// When a forward of T ≤ MaxGraphTokens tokens has run eagerly once, the next
// one of the same T is captured into a CUDA graph; later forwards whose
// records equal a captured list only stage their metadata on the host, and
// ReadRows launches the graph (one launch instead of hundreds). A forward
// of 12 launches or more is captured in two parts, the first ending after
// its eighth launch: a replay launches that part as soon as its records
// have matched, so the device works while the host walks the rest (~55 µs
// of a Qwen3-8B step on the H100's host; the split gained 0.7–0.9% in run
// 38). A forward that departs from every captured list runs the records it
// skipped eagerly and carries on eagerly, so replay never changes results.
// No model code is involved.
//
// # Hybrid models
//
// Qwen3-Next, Qwen3.5 and Qwen3.5-MoE need backend.Recurrent (recurrent.go,
// kernels/recurrent.cu): the causal conv and its state, the gated delta rule,
// the gated RMSNorm, and the gated attention's column slice and sigmoid gate.
// The delta rule runs token by token for prefills as well as decode (the
// contract allows the recurrent form everywhere; the CPU backend's chunked
// form agrees with it up to rounding): a block holds a value head's rows of
// the state in registers, a few threads a row, so a token costs no
// block-wide synchronisation. Each sequence's token range, state slot and
// fresh start are staged metadata, so hybrid decode steps replay as graphs.
// Key head dims 8, 16, 32, 64, 128 and 256 are compiled; a model of another
// fails at load, naming the dim (backend.GDNShapeChecker).
//
// # Sampling
//
// Unless INFERNIX_CUDA_SAMPLE=0 the backend is a backend.RowSampler: the
// LM head's rows stay on the device, kernels/sample.cu chooses each row's
// token as engine/sample would (the uniform number comes from the
// sequence's own generator on the host) and computes the requested
// log-probabilities, and 176 bytes per row come back instead of the
// vocabulary's logits. See sample.go for what is identical to the host
// and what is not.
//
// # Environment
//
//	INFERNIX_CUDA_GRAPHS=0        run every forward eagerly
//	INFERNIX_CUDA_GRAPH_COPIES=inline  captured graphs keep each metadata copy where it was recorded
//	                              (default: one copy of the forward's metadata before its first kernel;
//	                              inline, each forward's graph is one part)
//	INFERNIX_CUDA_GRAPH_SPLIT=0   capture each forward as one graph, launched after the host's walk
//	                              (default: long forwards in two parts, the first launched during it)
//	INFERNIX_CUDA_ATTN=split      never use the tensor-core prefill attention
//	INFERNIX_CUDA_DECODE_ATTN=old decode attention through attn_split + attn_combine
//	INFERNIX_CUDA_DECODE_ATTN=tc2 decode attention with the transposed products (attn_decode_tc2, G ≤ 8)
//	INFERNIX_CUDA_DECODE_ATTN=simt decode attention without the tensor cores (attn_decode; the
//	                              default is attn_decode_tc where the head dim allows)
//	INFERNIX_CUDA_SAMPLE_FLOOR=0  the device sampler's selections count the whole row (kernels/sample.cu's
//	                              SEL_FLOOR=0, HIST_ANY=0; the default counts from a floor below the maximum)
//	INFERNIX_CUDA_MOE_GROUPED=0   MoE prefill through the indexed kernels instead of per-expert GEMMs
//	INFERNIX_CUDA_GEMVF="GF_U=4"  a variant of the fused decode products (gemvf_variant.go)
//	INFERNIX_CUDA_PREFILL_ROWS=128 prefill attention tiles of 128 rows (8 warps) instead of 64
//	INFERNIX_CUDA_GEMM_ALGO=k     cuBLASLt's k-th heuristic choice for products of ≤ 64 rows
//	INFERNIX_CUDA_ATTN_BLOCKS=N   blocks a decode-attention launch aims at (default 2 per SM)
//	INFERNIX_CUDA_ATTN_DEFER=0    the folded decode attention's last split merges the others (default: attn_merge_splits, a kernel of its own)
//	INFERNIX_CUDA_ATTN_CLUSTER=16 the folded decode attention's splits (at most 16; contexts of up to 32
//	                              splits are cut to 16) merge within a thread-block cluster instead of
//	                              attn_merge_splits (sm_90; run 21: no faster)
//	INFERNIX_CUDA_ATTN_DYN=U      long contexts' folded decode attention: splits ("units") of U tiles
//	                              (U ≥ 2) handed out to a fixed number of blocks as they ask (ATTN_DYN)
//	INFERNIX_CUDA_ATTN_ACC=1      with ATTN_DYN: a block adds all the units it takes into one partial
//	                              (ATTN_ACC; results vary by rounding with the order the blocks ask)
//	INFERNIX_CUDA_ATTN_STAGES=2   the decode attention's K/V tile stages (default 3 up to head dim 128: 2 blocks per SM; 2: 3 blocks)
//	INFERNIX_CUDA_FUSE=0          no operator fusion (fuse.go)
//	INFERNIX_CUDA_NOFUSE=a,b      turn off parts: gemvf, norm, resid, swiglu, attn, prep (the
//	                              q/k prep folded into the decode attention)
//	INFERNIX_CUDA_PDL=0           no programmatic dependent launch (on where the device has it)
//	INFERNIX_CUDA_PDL_TRIGGER=n   where kernels let the next launch: 0 entry, 1 after the main
//	                              loop, 2 exit (the default; kernels/prelude.cuh)
//	INFERNIX_CUDA_DEFINES="A=1"   more -D defines for every kernel module (experiments; spaces or commas between;
//	                              the fused products' shapes, GF_RW, GF_KS*, GF_TMA/TS/TC, join INFERNIX_CUDA_GEMVF)
//	INFERNIX_CUDA_GEMV_MAX=N      most rows through the decode GEMV (default 8)
//	INFERNIX_CUDA_SAMPLE=0        choose tokens on the host (default: on the device, sample.go)
//	INFERNIX_CUDA_KV_COPY=0       no KV block copies to the host: the prefix cache stays in device memory
//	INFERNIX_CUDA_SKINNY=1        bf16 products of 9–16 rows through gemm_skinny (tensor cores) instead of
//	                              cuBLASLt, q|k|v and gate|up one launch each (run 22, a launch a
//	                              product: +2% at 16 lanes)
//	INFERNIX_CUDA_MLP=fused       a one-token dense MLP (norm, gate|up, SwiGLU, down, residual) in one
//	                              launch, kernels/mlp.cu, down read from a transposed copy made once per
//	                              weight (mlp.go; opt-in, results vary by rounding with the blocks' order);
//	                              INFERNIX_CUDA_MLP_BLOCKS, _WARPS, _DEFINES set its grid and tunables
//	INFERNIX_CUDA_OPROJ=fold      a one-token decode attention's split merge folded into the o-projection
//	                              and its residual add (attn_oproj in kernels/attention.cu, oproj.go;
//	                              opt-in; the heads' shares add in head order: deterministic)
//	INFERNIX_CUDA_KV=bf16         KV cache in bf16 (default f16, saturated at ±65504; attention.go)
//	INFERNIX_KERNEL_CACHE=DIR     compiled-kernel cache (default: user cache dir)
//	INFERNIX_CUDA_VERBOSE=1       log compilation and kernel resources
package cuda
