// Causal prefill attention in flash-attention style on the tensor cores
// (mma.sync m16n8k16, 16-bit operands, f32 accumulation). Compiled per model
// with -DHD=<head dim> (16…128, a multiple of 16), -DG=<query heads per KV
// head> (a power of two ≤ 16) and -DKVDT=<the cache's element type>
// (DT_BF16, the default, or DT_F16). The tensor cores take both operands of
// a product in one type, so Q and P are packed in the cache's type too: with
// an f16 cache, Q (saturated to ±65504 like the cache) and P (in [0, 1]) keep
// 3 more mantissa bits than with bf16.
//
// A block (4 warps; 8 with -DPF_ROWS=128) takes one tile of QT = PF_ROWS / G
// consecutive tokens of one sequence and one KV head: its rows are
// (token, head-in-group) pairs, row r = token·G + g, so the K/V tiles it
// streams from the paged cache serve all G heads. One cache block (64 positions) is one K/V tile; tiles are double
// buffered in shared memory with cp.async. Online softmax in registers.
//
// Metadata: tiles[2i] = first token of tile i, tiles[2i+1] = its token count;
// pos, tokTab and tabs as in attention.cu. Positions of a tile's tokens
// increase, so the last token's position bounds the keys the tile needs.

#ifndef HD
#error "HD must be defined"
#endif
#ifndef G
#error "G must be defined"
#endif
#ifndef KVDT
#define KVDT DT_BF16
#endif
#define pack_kv pack_kt<KVDT>
#define mma_kv mma16816<KVDT>

#ifndef PF_ROWS
#define PF_ROWS 64  // rows of a tile: 64 (4 warps) or 128 (8 warps; INFERNIX_CUDA_PREFILL_ROWS)
#endif
#define PF_QT (PF_ROWS / G)
#define PF_THREADS (PF_ROWS * 2)  // a warp per 16 rows
#define PF_LD (HD + 8)  // padded row (elements): rows land 4 banks apart
#define PF_TILE (64 * PF_LD)

// Copies cache block blk (K and V of KV head h) into a shared-memory stage;
// V rows of positions past last are zeroed so that 0·garbage never reaches
// the accumulators.
__device__ __forceinline__ void load_tile(u16* ks, u16* vs, const u16* kc, const u16* vc, long blk, int kvh, int h,
                                          int firstPos, int last) {
  const long base = ((blk * kvh + h) * 64) * HD;
  for (int c = threadIdx.x; c < 64 * (HD / 8); c += PF_THREADS) {
    const int row = c / (HD / 8), col = (c % (HD / 8)) * 8;
    cp_async16(smem_addr(ks + row * PF_LD + col), kc + base + (long)row * HD + col);
    if (firstPos + row <= last) {
      cp_async16(smem_addr(vs + row * PF_LD + col), vc + base + (long)row * HD + col);
    } else {
      *(uint4*)(vs + row * PF_LD + col) = make_uint4(0, 0, 0, 0);
    }
  }
}

extern "C" __global__ void __launch_bounds__(PF_THREADS) attn_prefill(
    const u16* __restrict__ kc, const u16* __restrict__ vc, const float* __restrict__ q, float* __restrict__ out,
    const int* __restrict__ tiles, const int* __restrict__ tokTab, const int* __restrict__ pos, const int* __restrict__ tabs,
    int kvh, float scale) {
  // Stage s: K at smem + 2s·PF_TILE, V right after it.
  EXTERN_SMEM(u16, smem);

  // Grid (KV heads, tiles), tiles last first: blocks start in order of
  // blockIdx with x fastest, so the longest tiles (the most keys, at the end
  // of a causal prompt) start first on every head, and the short ones fill
  // the gaps at the end instead of one long tile running alone.
  const int h = blockIdx.x, tile = gridDim.y - 1 - blockIdx.y;
  const int tok0 = tiles[2 * tile], ntok = tiles[2 * tile + 1];
  const int heads = kvh * G;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int gq = lane >> 2, tq = lane & 3;  // mma fragment coordinates

  // This thread's two rows and their query positions. Rows past the tile's
  // tokens repeat its last token (finite values, never written back).
  const int nrows = ntok * G;
  int rr[2], qp[2];
  const float* qrow[2];
#pragma unroll
  for (int i = 0; i < 2; i++) {
    int r = warp * 16 + gq + 8 * i;
    rr[i] = r;
    if (r >= nrows) r = nrows - 1;
    const int tk = tok0 + r / G;
    qp[i] = pos[tk];
    qrow[i] = q + ((long)tk * heads + (long)h * G + (r % G)) * HD;
  }
  const int last = pos[tok0 + ntok - 1];
  const int* tab = tabs + tokTab[tok0];
  const int nblk = last / 64 + 1;

  load_tile(smem, smem + PF_TILE, kc, vc, tab[0], kvh, h, 0, last);
  cp_async_commit();

  // Q fragments (KVDT) for every 16-wide k step.
  u32 qa[HD / 16][4];
#pragma unroll
  for (int ks = 0; ks < HD / 16; ks++) {
    const int c = ks * 16 + 2 * tq;
    const float2 x0 = *(const float2*)(qrow[0] + c), x1 = *(const float2*)(qrow[1] + c);
    const float2 x2 = *(const float2*)(qrow[0] + c + 8), x3 = *(const float2*)(qrow[1] + c + 8);
    qa[ks][0] = pack_kv(x0.x, x0.y);
    qa[ks][1] = pack_kv(x1.x, x1.y);
    qa[ks][2] = pack_kv(x2.x, x2.y);
    qa[ks][3] = pack_kv(x3.x, x3.y);
  }

  float o[HD / 8][4];
#pragma unroll
  for (int nd = 0; nd < HD / 8; nd++) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.f;
  float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.f, 0.f};
  const float sl2 = scale * 1.4426950408889634f;  // scores in log2 units

  for (int j = 0; j < nblk; j++) {
    if (j + 1 < nblk) {
      u16* nk = smem + ((j + 1) & 1) * 2 * PF_TILE;
      load_tile(nk, nk + PF_TILE, kc, vc, tab[j + 1], kvh, h, (j + 1) * 64, last);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const u16* ks_ = smem + (j & 1) * 2 * PF_TILE;
    const u16* vs_ = ks_ + PF_TILE;

    // S = Q·Kᵀ: 16 rows × 64 positions per warp, 8 n-tiles of 8.
    float s[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
      s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < HD / 16; kk += 2) {
        u32 b0, b1, b2, b3;
        ldsm_x4(smem_addr(ks_ + (nt * 8 + (lane & 7)) * PF_LD + kk * 16 + (lane >> 3) * 8), b0, b1, b2, b3);
        mma_kv(s[nt], qa[kk][0], qa[kk][1], qa[kk][2], qa[kk][3], b0, b1);
        if (kk + 1 < HD / 16) mma_kv(s[nt], qa[kk + 1][0], qa[kk + 1][1], qa[kk + 1][2], qa[kk + 1][3], b2, b3);
      }
    }
    // Causal mask and scale, then the online softmax.
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int kp = j * 64 + nt * 8 + 2 * tq + (e & 1);
        s[nt][e] = kp <= qp[e >> 1] ? s[nt][e] * sl2 : NEG_INF;
      }
    }
    online_softmax(s, m, l, o);
    // O += P·V: P's accumulator layout is the A-fragment layout of the next
    // product (two 8-wide n-tiles make one 16-wide k step).
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
      const u32 a0 = pack_kv(s[2 * kk][0], s[2 * kk][1]);
      const u32 a1 = pack_kv(s[2 * kk][2], s[2 * kk][3]);
      const u32 a2 = pack_kv(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      const u32 a3 = pack_kv(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int nd = 0; nd < HD / 8; nd += 2) {
        u32 b0, b1, b2, b3;
        ldsm_x4_t(smem_addr(vs_ + (kk * 16 + (lane & 15)) * PF_LD + (nd + (lane >> 4)) * 8), b0, b1, b2, b3);
        mma_kv(o[nd], a0, a1, a2, a3, b0, b1);
        mma_kv(o[nd + 1], a0, a1, a2, a3, b2, b3);
      }
    }
    __syncthreads();  // the stage is overwritten by the load issued next iteration
  }

#pragma unroll
  for (int i = 0; i < 2; i++) {
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
  }
#pragma unroll
  for (int i = 0; i < 2; i++) {
    const int r = rr[i];
    if (r >= nrows) continue;
    const float inv = 1.f / l[i];
    float* orow = out + ((long)(tok0 + r / G) * heads + (long)h * G + (r % G)) * HD;
#pragma unroll
    for (int nd = 0; nd < HD / 8; nd++) {
      *(float2*)(orow + nd * 8 + 2 * tq) = make_float2(o[nd][2 * i] * inv, o[nd][2 * i + 1] * inv);
    }
  }
}
