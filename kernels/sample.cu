// Token sampling on the device (engine/backend/cuda/sample.go): one block per
// logits row turns the row into the next token and its log-probabilities,
// following engine/sample's pipeline step for step, so that only a few
// hundred bytes per row return to the host.
//
// Per row, in order:
//  1. one pass over the raw logits: the argmax, the log-softmax normaliser
//     (online max and sum of exponentials) and, when alternatives are
//     wanted, the first radix histogram of their order keys;
//  2. the n most likely raw tokens (radix select, then the few candidates
//     sorted in shared memory);
//  3. logit bias, repetition, frequency and presence penalties applied in
//     place to the listed ids (the raw values saved for the log-prob), and
//     constrained decoding's mask (the tokens not allowed set to -Inf);
//  4. greedy: the argmax of the adjusted logits; otherwise top-k by radix
//     select, then either (top-k <= 256, engine/sample's heap path) the
//     candidates in rank order with float64 weights, top-p, min-p and the
//     draw walked by one thread exactly as the host does, or (no top-k or
//     a larger one, the scan path) weights exp((l - max)/T) computed with
//     the host's own float32 polynomial, the top-p cutoff found by
//     histograms of probability mass, and the draw over the kept tokens in
//     id order;
//  5. the chosen token's log-probability under the raw logits.
// The uniform number of the draw comes from the host (sample.Draw.U), so a
// seeded sequence draws what the host would have drawn; sums are formed in
// another order than on the host, so a draw whose number falls within
// rounding (~1e-16 relative) of a boundary between two tokens may differ.
//
// Nothing here sorts the vocabulary: selections are radix histograms
// (11/11/10 bits of an order-preserving key) until at most SCAND
// candidates remain, which are sorted in shared memory.
//
// A row's block is alone on its SM. The passes go through sweep, which
// issues SU loads per thread before using any; each thread still visits
// its items (tid, tid + NT, ...) in increasing order, so per-thread results
// (the argmax's first index, the log-sum-exp's partial sums) are those of
// one load at a time. It did not make a top-k 20 draw (~100-150 µs more
// than a greedy one on an H100) any faster (tests/device/NOTES.md, run
// 39). What it cost was the first radix level's match per warp and item
// over the whole row: the selections' floors (sel_floor, HIST_ANY), the
// default since run 40, skip most of it (top-k 20 237 -> 146 µs a row).
//
// Written for any blockDim.x that is a multiple of 32 up to 1024, and only
// with the intrinsics kernels/emu emulates, so that the same source runs
// under a CPU emulation in the tests.

#define SMAX_TOP 20
#define SCAND 2048
#define SBINS 2048

#define S_GREEDY 1
#define S_RANK 2
#define S_LOGPROB 4

// One row's job, written by sample.go (20 words).
struct SampleParams {
  int force;  // >= 0: the token is given; -1: sample
  int flags;  // S_*
  int ntop;   // alternatives wanted (<= SMAX_TOP)
  int topk;   // 0: off
  float invT; // float32(1/T): the scan path's weights
  float minp; // 0: off
  float rep;  // repetition penalty (1: off)
  float presence, frequency;
  int nbias, nseen, ngen;
  int off;    // word offset of this row's lists in the lists array
  int mask;   // 1 + word offset of the allowed tokens' bits (bit i%32 of word i/32), 0: none
  double invT64; // 1/T: the heap path's weights
  double topp;   // 1: off
  double u;      // the draw's uniform number
};

// What returns to the host per row (44 words).
struct SampleOut {
  int token;
  float logprob;
  int ntop;
  int pad;
  int ids[SMAX_TOP];
  float lps[SMAX_TOP];
};

struct SampleShared {
  unsigned long long cand[SCAND]; // (~key << 32 | id): ascending = most likely first, then lower id
  double mass[SBINS];             // probability mass per bin; heap path: candidate weights
  u32 hist[SBINS];                // items per bin
  double redd[32];
  float redf[32];
  int redi[32], redj[32];
  int ord[SMAX_TOP];
  int ncand, bin, above, tok, last, found;
  double aboved;
};

#define FULL 0xffffffffu

#ifndef SU
#define SU 8
#endif

// Calls use(i, ok, load(i)) for i = base + j·blockDim.x + threadIdx.x,
// j < SU, for each base = 0, SU·blockDim.x, ...; every thread calls use
// the same number of times (ok false past V, where v is T{}), so use may
// hold warp collectives such as hist_inc.
template <class T, class Load, class Use>
__device__ __forceinline__ void sweep(int V, Load load, Use use) {
  const int nt = blockDim.x;
  for (int base = 0; base < V; base += nt * SU) {
    T v[SU];
#pragma unroll
    for (int j = 0; j < SU; j++) {
      const int i = base + j * nt + (int)threadIdx.x;
      v[j] = i < V ? load(i) : T{};
    }
#pragma unroll
    for (int j = 0; j < SU; j++) {
      const int i = base + j * nt + (int)threadIdx.x;
      use(i, i < V, v[j]);
    }
  }
}

// float ↔ order-preserving key; NaN ranks as -Inf, as engine/sample has it.
__device__ __forceinline__ u32 order_key(float f) {
  u32 b = __float_as_uint(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) b = 0xff800000u;
  return b ^ ((u32)((int)b >> 31) | 0x80000000u);
}
__device__ __forceinline__ float from_order_key(u32 k) {
  return (k >> 31) ? __uint_as_float(k & 0x7fffffffu) : __uint_as_float(~k);
}

// engine/sample's expWeights kernel for x in [-87.3, 0], operation for
// operation in float32 without contraction, so that weights equal the
// host's bit for bit (hex constants: the host's float32 roundings).
__device__ __forceinline__ float host_exp(float x) {
  const float log2e = __uint_as_float(0x3fb8aa3bu), ln2Hi = __uint_as_float(0x3f318000u), ln2Lo = __uint_as_float(0xb95e8083u);
  const float c6 = __uint_as_float(0x3e2aaaabu), c24 = __uint_as_float(0x3d2aaaabu), c120 = __uint_as_float(0x3c088889u),
              c720 = __uint_as_float(0x3ab60b61u);
  const int n = (int)__fsub_rn(__fmul_rn(x, log2e), 0.5f);
  const float nf = (float)n;
  const float r = __fsub_rn(__fsub_rn(x, __fmul_rn(nf, ln2Hi)), __fmul_rn(nf, ln2Lo));
  const float r2 = __fmul_rn(r, r);
  const float a = __fadd_rn(1.f, r);
  const float b = __fmul_rn(r2, __fadd_rn(0.5f, __fmul_rn(r, c6)));
  const float c = __fmul_rn(__fmul_rn(r2, r2), __fadd_rn(__fadd_rn(c24, __fmul_rn(r, c120)), __fmul_rn(r2, c720)));
  const float p = __fadd_rn(__fadd_rn(a, b), c);
  return __fmul_rn(p, __uint_as_float((u32)(n + 127) << 23));
}

// The scan path's weight of logit l: exp((l - m)·invT), 0 below the top-k
// floor, for -Inf and NaN, and below float32's normal range.
__device__ __forceinline__ float weight(float l, float m, float invT, float floor) {
  const float x = __fmul_rn(__fsub_rn(l, m), invT);
  if (x >= __uint_as_float(0xc2ae999au) && l >= floor) return host_exp(x);
  return 0.f;
}

// l - lse with engine/sample's limits (logProb).
__device__ __forceinline__ float log_prob(float l, double lse) {
  if (l != l) return NEG_INF;
  if (isinf(lse)) return (isinf(l) && l > 0.f) ? 0.f : NEG_INF;
  return (float)((double)l - lse);
}

// ---- block primitives (every thread calls them) ----

__device__ __forceinline__ double block_sum(double v, SampleShared& S) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
  if (lane == 0) S.redd[warp] = v;
  __syncthreads();
  double t = 0;
  for (int w = 0; w < nw; w++) t += S.redd[w];
  __syncthreads();
  return t;
}

// Largest value and the lowest index holding it; (-Inf, sentinel) pairs
// lose to everything.
__device__ __forceinline__ void block_argmax(float& v, int& i, SampleShared& S) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(FULL, v, o);
    const int oi = __shfl_xor_sync(FULL, i, o);
    if (ov > v || (ov == v && oi < i)) v = ov, i = oi;
  }
  if (lane == 0) S.redf[warp] = v, S.redi[warp] = i;
  __syncthreads();
  v = S.redf[0], i = S.redi[0];
  for (int w = 1; w < nw; w++)
    if (S.redf[w] > v || (S.redf[w] == v && S.redi[w] < i)) v = S.redf[w], i = S.redi[w];
  __syncthreads();
}

// Online log-sum-exp partials (m, s = Σ exp(l - m)) merged over the block.
__device__ __forceinline__ double block_lse(float m, double s, SampleShared& S) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  float M = m;
  for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(FULL, M, o));
  if (lane == 0) S.redf[warp] = M;
  __syncthreads();
  M = S.redf[0];
  for (int w = 1; w < nw; w++) M = fmaxf(M, S.redf[w]);
  __syncthreads();
  if (isinf(M)) return (double)M; // no finite maximum: -Inf, or +Inf present
  const double t = block_sum(m == NEG_INF ? 0.0 : s * (double)expf(m - M), S);
  return (double)M + log(t);
}

// Exclusive prefix sum over threads in thread order; *total gets the sum.
__device__ __forceinline__ int block_scan_int(int v, int* total, SampleShared& S) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  int x = v;
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(FULL, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31) S.redj[warp] = x;
  __syncthreads();
  int before = 0, t = 0;
  for (int w = 0; w < nw; w++) {
    if (w < warp) before += S.redj[w];
    t += S.redj[w];
  }
  __syncthreads();
  *total = t;
  return before + x - v;
}

__device__ __forceinline__ double block_scan_double(double v, SampleShared& S) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  double x = v;
  for (int o = 1; o < 32; o <<= 1) {
    const double y = __shfl_up_sync(FULL, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31) S.redd[warp] = x;
  __syncthreads();
  double before = 0;
  for (int w = 0; w < warp; w++) before += S.redd[w];
  __syncthreads();
  return before + x - v;
}

#ifndef HIST_ATOMIC
#define HIST_ATOMIC 0
#endif
#ifndef HIST_ANY
#define HIST_ANY 1
#endif

// hist[bin] += 1 for every lane with bin >= 0, one atomic per distinct bin
// of the warp (logits crowd into few bins). All 32 lanes call it. A warp
// with no bin skips the match (HIST_ANY=1), which should cost far more than
// the vote: after the first radix level, or below sel_floor, most warps
// have none. HIST_ATOMIC=1: one atomic per lane instead of the match.
__device__ __forceinline__ void hist_inc(u32* hist, int bin) {
#if HIST_ATOMIC
  if (bin >= 0) atomicAdd(&hist[bin], 1u);
#else
#if HIST_ANY
  if (!__any_sync(FULL, bin >= 0)) return;
#endif
  const u32 peers = __match_any_sync(FULL, bin);
  if (bin >= 0 && (int)(threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&hist[bin], (u32)__popc(peers));
#endif
}

// Sorts S.cand[0..n) ascending (bitonic, n <= SCAND).
__device__ void sort_cand(int n, SampleShared& S) {
  int N = 1;
  while (N < n) N <<= 1;
  for (int i = n + threadIdx.x; i < N; i += blockDim.x) S.cand[i] = ~0ull;
  __syncthreads();
  for (int k = 2; k <= N; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < N; i += blockDim.x) {
        const int p = i ^ j;
        if (p > i) {
          const unsigned long long a = S.cand[i], b = S.cand[p];
          if ((a > b) == ((i & k) == 0)) S.cand[i] = b, S.cand[p] = a;
        }
      }
      __syncthreads();
    }
  }
}

#ifndef SEL_FLOOR
#define SEL_FLOOR 2
#endif
#ifndef SEL_DELTA
#define SEL_DELTA 4.0f
#endif

// The first radix level's floor, try `step`, for a selection among items
// whose largest value is m: only keys at or above it are counted, so most
// warps skip the histogram; select_kth tries the next, lower floor when
// fewer than k items reach one, down to 0 (everything). A floor is the
// lower edge of a first-level bin, so that a bin is counted whole or not
// at all. SEL_FLOOR=2: the bins of m - SEL_DELTA, then m - 4·SEL_DELTA
// (logits, before the temperature: a language model's top 20 mostly lie
// within a few units of its maximum, and a confident step's within a few
// more; the default, tests/device/NOTES.md run 40); 1: 16 bins (four
// binades) below m's; 0 (before run 40, INFERNIX_CUDA_SAMPLE_FLOOR=0): none.
__device__ __forceinline__ u32 sel_floor(float m, int step) {
#if SEL_FLOOR == 2
  if (step < 2) return (order_key(m - (step == 0 ? SEL_DELTA : 4.0f * SEL_DELTA)) >> 21) << 21;
  return 0u;
#elif SEL_FLOOR == 1
  const u32 b = order_key(m) >> 21;
  return step == 0 && b > 16u ? (b - 16u) << 21 : 0u;
#else
  return 0u;
#endif
}

// Radix levels over 32-bit keys: 11, 11 and 10 bits.
__device__ __forceinline__ int level_shift(int lv) { return lv == 0 ? 21 : lv == 1 ? 10 : 0; }
__device__ __forceinline__ int level_bins(int lv) { return lv == 2 ? 1024 : 2048; }

// Selection state: items whose key's resolved bits (mask) equal prefix are
// in the chosen bin; above counts the items in higher bins; count = above +
// the bin's items, i.e. every item with key >= prefix.
struct Sel {
  u32 prefix, mask;
  int above, count;
  bool exact; // all 32 bits resolved: prefix is the k-th key itself
};

// Finds the k-th largest key (k >= 1) among the items (key(i) for i < V) by
// radix levels, stopping as soon as the items with key >= the bin's prefix
// number at most SCAND. ready: S.hist already holds the first level (of
// every item). Otherwise the first level counts only keys >= sel_floor(m,
// step), starting over with the next floor when fewer than k items reach
// one.
template <class Key>
__device__ Sel select_kth(Key key, int V, int k, bool ready, float m, SampleShared& S) {
  Sel s = {0u, 0u, 0, 0, false};
  int step = 0;
  u32 lo = ready ? 0u : sel_floor(m, 0);
  for (int lv = 0; lv < 3; lv++) {
    const int sh = level_shift(lv), nb = level_bins(lv);
    if (!(lv == 0 && ready)) {
      for (int b = threadIdx.x; b < nb; b += blockDim.x) S.hist[b] = 0;
      __syncthreads();
      sweep<u32>(V, key, [&](int, bool ok, u32 kk) {
        int bin = -1;
        if (ok && (kk & s.mask) == s.prefix && kk >= lo) bin = (int)((kk >> sh) & (u32)(nb - 1));
        hist_inc(S.hist, bin);
      });
      __syncthreads();
    }
    // The bin holding the k-th from the top: each thread sums a run of bins
    // (from the top), a scan orders the runs, one run contains it.
    const int per = (nb + blockDim.x - 1) / blockDim.x, hi = nb - 1 - (int)threadIdx.x * per;
    int mine = 0;
    for (int j = 0; j < per; j++)
      if (hi - j >= 0) mine += S.hist[hi - j];
    if (threadIdx.x == 0) S.bin = -1;
    int total;
    const int excl = block_scan_int(mine, &total, S);
    if (excl < k && k <= excl + mine) {
      int c = excl;
      for (int j = 0; j < per && hi - j >= 0; j++) {
        const int h = (int)S.hist[hi - j];
        if (c + h >= k) {
          S.bin = hi - j, S.above = c;
          break;
        }
        c += h;
      }
    }
    __syncthreads();
    const int b = S.bin >= 0 ? S.bin : 0, ab = S.bin >= 0 ? S.above : total - (int)S.hist[0];
    const int inbin = (int)S.hist[b];
    __syncthreads();
    if (lv == 0 && lo > 0u && total < k) { // the k-th lies below the floor
      u32 next;
      do
        next = sel_floor(m, ++step);
      while (next >= lo && next > 0u); // a floor at or above the last: skip it
      lo = next;
      lv = -1;
      continue;
    }
    k -= ab;
    s.above += ab;
    s.prefix |= (u32)b << sh;
    s.mask |= (u32)(nb - 1) << sh;
    s.count = s.above + inbin;
    s.exact = lv == 2;
    if (s.count <= SCAND) break;
  }
  return s;
}

// Gathers every item with key >= lo (at most SCAND of them) into S.cand,
// sorted, and returns how many.
template <class Key>
__device__ int gather_sorted(Key key, int V, u32 lo, SampleShared& S) {
  if (threadIdx.x == 0) S.ncand = 0;
  __syncthreads();
  sweep<u32>(V, key, [&](int i, bool ok, u32 kk) {
    if (ok && kk >= lo) {
      const int slot = atomicAdd(&S.ncand, 1);
      if (slot < SCAND) S.cand[slot] = ((unsigned long long)(~kk) << 32) | (u32)i;
    }
  });
  __syncthreads();
  const int n = min(S.ncand, SCAND);
  __syncthreads();
  sort_cand(n, S);
  return n;
}

// Writes to S.ord the ids, in increasing order, of the items matching pred
// ranked skip .. skip+need-1 among all matches; returns how many it wrote.
template <class Pred>
__device__ int ordered_matches(Pred pred, int V, int skip, int need, SampleShared& S) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  int found = 0;
  for (int base = 0; base < V && found < skip + need; base += blockDim.x) {
    const int i = base + threadIdx.x;
    const bool f = i < V && pred(i);
    const u32 bal = __ballot_sync(FULL, f);
    if (lane == 0) S.redj[warp] = __popc(bal);
    __syncthreads();
    int before = 0, tot = 0;
    for (int w = 0; w < nw; w++) {
      if (w < warp) before += S.redj[w];
      tot += S.redj[w];
    }
    const int rank = found + before + __popc(bal & ((1u << lane) - 1u));
    if (f && rank >= skip && rank < skip + need) S.ord[rank - skip] = i;
    found += tot;
    __syncthreads();
  }
  return min(max(found - skip, 0), need);
}

// Top-p cutoff of the scan path (engine/sample's topPCutoff): the last
// token (weight wc, id ic) of the shortest prefix of the ranking (weight
// descending, then id) whose weight reaches target, and the prefix's
// weight. Levels of mass histograms over the weights' bits (bits 19-29,
// 9-18, 0-8: weights are in (0, 1]) narrow to a bin small enough to sort.
// Returns false if rounding kept the total below target.
template <class W>
__device__ bool topp_cutoff(W w, int V, double target, float* wc, int* ic, double* cum, SampleShared& S) {
  u32 prefix = 0, mask = 0;
  double above = 0;
  for (int lv = 0; lv < 3; lv++) {
    const int sh = lv == 0 ? 19 : lv == 1 ? 9 : 0, nb = lv == 0 ? 2048 : lv == 1 ? 1024 : 512;
    for (int b = threadIdx.x; b < nb; b += blockDim.x) S.hist[b] = 0, S.mass[b] = 0;
    __syncthreads();
    sweep<float>(V, w, [&](int, bool ok, float e) {
      int bin = -1;
      const u32 bits = __float_as_uint(e);
      if (ok && e > 0.f && (bits & mask) == prefix) bin = (int)((bits >> sh) & (u32)(nb - 1));
      hist_inc(S.hist, bin);
      if (bin >= 0) atomicAdd(&S.mass[bin], (double)e);
    });
    __syncthreads();
    // The first non-empty bin from the top at which the running mass
    // reaches target; every later non-empty bin reaches it too, so the
    // topmost one reporting wins.
    const int per = (nb + blockDim.x - 1) / blockDim.x, hi = nb - 1 - (int)threadIdx.x * per;
    double mine = 0;
    for (int j = 0; j < per; j++)
      if (hi - j >= 0) mine += S.mass[hi - j];
    if (threadIdx.x == 0) S.bin = -1;
    const double excl = above + block_scan_double(mine, S);
    int hit = -1;
    double hitAbove = 0;
    {
      double c = excl;
      for (int j = 0; j < per && hi - j >= 0; j++) {
        const double m = S.mass[hi - j];
        if (m > 0 && c + m >= target) {
          hit = hi - j, hitAbove = c;
          break;
        }
        c += m;
      }
    }
    if (hit >= 0) atomicMax(&S.bin, hit);
    __syncthreads();
    if (hit >= 0 && hit == S.bin) S.aboved = hitAbove;
    __syncthreads();
    const int b = S.bin;
    if (b < 0) return false;
    above = S.aboved;
    const int inbin = (int)S.hist[b];
    __syncthreads();
    prefix |= (u32)b << sh;
    mask |= (u32)(nb - 1) << sh;
    if (inbin <= SCAND) {
      // Sort the bin's members and walk them as the host does.
      if (threadIdx.x == 0) S.ncand = 0;
      __syncthreads();
      sweep<float>(V, w, [&](int i, bool ok, float e) {
        const u32 bits = __float_as_uint(e);
        if (ok && e > 0.f && (bits & mask) == prefix) {
          const int slot = atomicAdd(&S.ncand, 1);
          if (slot < SCAND) S.cand[slot] = ((unsigned long long)(~bits) << 32) | (u32)i;
        }
      });
      __syncthreads();
      const int n = min(S.ncand, SCAND);
      __syncthreads();
      sort_cand(n, S);
      if (threadIdx.x == 0) {
        double c = above;
        float x = 0.f;
        int id = 0;
        for (int j = 0; j < n; j++) {
          x = __uint_as_float(~(u32)(S.cand[j] >> 32));
          id = (int)(u32)S.cand[j];
          c += (double)x;
          if (c >= target) break;
        }
        S.redf[0] = x, S.redi[0] = id, S.redd[0] = c;
      }
      __syncthreads();
      *wc = S.redf[0], *ic = S.redi[0], *cum = S.redd[0];
      __syncthreads();
      return true;
    }
  }
  // More than SCAND tokens share the exact weight wc: take them one at a
  // time in id order until the mass reaches target.
  const float x = __uint_as_float(prefix);
  if (threadIdx.x == 0) {
    double c = above;
    int j = 0;
    const int n = (int)S.hist[prefix & 511u];
    while (j < n) {
      c += (double)x;
      j++;
      if (c >= target) break;
    }
    S.redi[0] = j, S.redd[0] = c;
  }
  __syncthreads();
  const int j = S.redi[0];
  *cum = S.redd[0];
  __syncthreads();
  ordered_matches([&](int i) { return __float_as_uint(w(i)) == prefix; }, V, j - 1, 1, S);
  *wc = x, *ic = S.ord[0];
  __syncthreads();
  return true;
}

extern "C" __global__ void __launch_bounds__(1024)
    sample_rows(const SampleParams* __restrict__ P, int* lists, float* logits, int V, SampleOut* out) {
  STEP_TIMER();
  PDL_ENTRY();
  __shared__ SampleShared S;
  const SampleParams p = P[blockIdx.x];
  float* L = logits + (long)blockIdx.x * V;
  SampleOut* o = out + blockIdx.x;
  const int tid = threadIdx.x, NT = blockDim.x;
  const bool wantLP = (p.flags & S_LOGPROB) != 0;
  const int ntop = min(p.ntop, min(SMAX_TOP, V));
  const bool masked = p.force < 0 && p.mask > 0;
  const bool edits = p.force < 0 && (p.nbias > 0 || p.nseen > 0 || p.ngen > 0 || masked);
  const bool greedy = (p.flags & S_GREEDY) != 0;
  // The alternatives' first level in the first pass, or (SEL_FLOOR) in a
  // pass of their own above a floor from the maximum.
  const bool hist1 = ntop > 0 && !SEL_FLOOR;

  // 1. The raw logits: argmax, log-sum-exp, first histogram for the
  // alternatives.
  if (hist1) {
    for (int b = tid; b < SBINS; b += NT) S.hist[b] = 0;
    __syncthreads();
  }
  float bv = NEG_INF, tm = NEG_INF;
  int bi = V;
  double ts = 0;
  sweep<float>(V, [&](int i) { return L[i]; }, [&](int i, bool ok, float l) {
    int bin = -1;
    if (ok) {
      if (l > bv) bv = l, bi = i;
      if (wantLP && l > NEG_INF) {
        if (l > tm) {
          ts = ts * (double)expf(tm - l) + 1.0;
          tm = l;
        } else if (tm < -NEG_INF) {
          ts += (double)expf(l - tm);
        }
      }
      if (hist1) bin = (int)(order_key(l) >> 21);
    }
    if (hist1) hist_inc(S.hist, bin);
  });
  __syncthreads();
  block_argmax(bv, bi, S);
  const int rawTop = bi < V ? bi : 0;
  const double lse = wantLP ? block_lse(tm, ts, S) : 0.0;

  // 2. The most likely raw tokens.
  if (ntop > 0) {
    auto rawKey = [&](int i) { return order_key(L[i]); };
    const Sel s = select_kth(rawKey, V, ntop, hist1, bi < V ? bv : NEG_INF, S);
    if (s.count <= SCAND) {
      const int n = gather_sorted(rawKey, V, s.prefix, S);
      if (tid < ntop && tid < n) {
        const unsigned long long c = S.cand[tid];
        o->ids[tid] = (int)(u32)c;
        o->lps[tid] = log_prob(from_order_key(~(u32)(c >> 32)), lse);
      }
    } else {
      // More than SCAND tokens tie with the ntop-th: those above it
      // (fewer than ntop) sorted, then the ties by id.
      const int n = gather_sorted(rawKey, V, s.prefix + 1u, S);
      if (tid < n) {
        const unsigned long long c = S.cand[tid];
        o->ids[tid] = (int)(u32)c;
        o->lps[tid] = log_prob(from_order_key(~(u32)(c >> 32)), lse);
      }
      const int m = ordered_matches([&](int i) { return order_key(L[i]) == s.prefix; }, V, 0, ntop - n, S);
      if (tid < m) {
        o->ids[n + tid] = S.ord[tid];
        o->lps[n + tid] = log_prob(from_order_key(s.prefix), lse);
      }
    }
    __syncthreads();
  }

  // 3. The token.
  int tok;
  if (p.force >= 0) {
    tok = p.force;
  } else if (greedy && !edits) {
    tok = rawTop;
  } else {
    const int* bid = lists + p.off;
    const float* bval = (const float*)(bid + p.nbias);
    const int* seen = bid + 2 * p.nbias;
    const int* gid = seen + p.nseen;
    const int* gcnt = gid + p.ngen;
    float* saved = (float*)(gcnt + p.ngen);
    if (edits) {
      // In engine/sample's order; each list names distinct ids. saved[e]
      // keeps the value before the edit: for the first list naming an id,
      // its raw logit.
      for (int e = tid; e < p.nbias; e += NT) {
        const float l = L[bid[e]];
        saved[e] = l;
        L[bid[e]] = __fadd_rn(l, bval[e]);
      }
      __syncthreads();
      for (int e = tid; e < p.nseen; e += NT) {
        const float l = L[seen[e]];
        saved[p.nbias + e] = l;
        L[seen[e]] = l > 0.f ? __fdiv_rn(l, p.rep) : __fmul_rn(l, p.rep);
      }
      __syncthreads();
      for (int e = tid; e < p.ngen; e += NT) {
        const float l = L[gid[e]];
        saved[p.nbias + p.nseen + e] = l;
        L[gid[e]] = __fsub_rn(__fsub_rn(l, __fmul_rn(p.frequency, (float)gcnt[e])), p.presence);
      }
      __syncthreads();
      if (masked) {
        // Constrained decoding: the tokens not allowed are -Inf, after the
        // edits (whose saved values stay the raw logits), as the host's
        // mask makes them before its edits (an edited -Inf stays -Inf).
        const u32* bits = (const u32*)(lists + p.mask - 1);
        sweep<u32>(V, [&](int i) { return bits[i >> 5]; }, [&](int i, bool ok, u32 w) {
          if (ok && !((w >> (i & 31)) & 1u)) L[i] = NEG_INF;
        });
        __syncthreads();
      }
      float v = NEG_INF;
      int vi = V;
      sweep<float>(V, [&](int i) { return L[i]; }, [&](int i, bool ok, float l) {
        if (ok && l > v) v = l, vi = i;
      });
      block_argmax(v, vi, S);
      bv = v, bi = vi;
    }
    const float m = bv;
    const int top = bi < V ? bi : 0;
    if (greedy || isinf(m)) {
      tok = top; // also: nothing above -Inf (token 0), or the first +Inf
    } else {
      auto adjKey = [&](int i) { return order_key(L[i]); };
      float floor = NEG_INF;
      bool done = false;
      tok = top;
      if (p.topk > 0) {
        const Sel s = select_kth(adjKey, V, p.topk, false, m, S);
        int nc = -1; // the heap path's candidates, when it applies
        if (s.count <= SCAND) {
          const int n = gather_sorted(adjKey, V, s.prefix, S);
          const u32 kth = ~(u32)(S.cand[p.topk - 1] >> 32);
          floor = from_order_key(kth);
          if (p.flags & S_RANK) {
            nc = p.topk;
            while (nc < n && ~(u32)(S.cand[nc] >> 32) == kth) nc++;
            if (floor == NEG_INF) // the host keeps exactly k then; the extra -Inf ones weigh 0
              nc = p.topk;
          }
        } else if ((p.flags & S_RANK) && from_order_key(s.prefix) == NEG_INF) {
          // Fewer than k tokens above -Inf (a constrained decoding mask
          // leaves few): those, in rank order; the host's extra -Inf ones
          // weigh 0.
          nc = gather_sorted(adjKey, V, s.prefix + 1u, S);
          floor = NEG_INF;
        } else {
          floor = from_order_key(s.prefix); // all bits resolved: the k-th value
        }
        if (nc > 0) {
          // The heap path: the candidates (ties with the k-th included)
          // in rank order; weights in float64 as the host computes them,
          // sums and the walk by one thread in the host's order.
          const double topv = (double)from_order_key(~(u32)(S.cand[0] >> 32));
          for (int j = tid; j < nc; j += NT)
            S.mass[j] = exp(((double)from_order_key(~(u32)(S.cand[j] >> 32)) - topv) * p.invT64);
          __syncthreads();
          if (tid == 0) {
            double z = 0;
            for (int j = 0; j < nc; j++) z += S.mass[j];
            int keep = nc;
            if (p.topp < 1.0) {
              const double target = p.topp * z;
              double cum = 0;
              for (int j = 0; j < nc; j++) {
                cum += S.mass[j];
                if (cum >= target) {
                  keep = j + 1;
                  break;
                }
              }
            }
            if (p.minp > 0.f)
              while (keep > 1 && S.mass[keep - 1] < (double)p.minp) keep--;
            double zk = 0;
            for (int j = 0; j < keep; j++) zk += S.mass[j];
            const double target = p.u * zk;
            double cum = 0;
            int last = 0, pick = -1;
            for (int j = 0; j < keep; j++) {
              const double e = S.mass[j];
              if (e > 0) {
                cum += e;
                last = j;
                if (target < cum) {
                  pick = j;
                  break;
                }
              }
            }
            S.tok = (int)(u32)S.cand[pick >= 0 ? pick : last];
          }
          __syncthreads();
          tok = S.tok;
          done = true;
        }
      }
      if (!done) {
        // The scan path over the whole vocabulary.
        const float invT = p.invT, minp = p.minp;
        auto w = [&](int i) { return weight(L[i], m, invT, floor); };
        double z = 0, zmin = 0;
        sweep<float>(V, w, [&](int, bool ok, float e) {
          if (ok) {
            z += (double)e;
            if (e >= minp) zmin += (double)e;
          }
        });
        z = block_sum(z, S);
        if (minp > 0.f) zmin = block_sum(zmin, S);
        float lo = 0.f;
        int iLim = -1;
        double zp = z;
        if (minp > 0.f) lo = minp, iLim = 0x7fffffff, zp = zmin;
        if (p.topp < 1.0) {
          float wc;
          int ic;
          double cum;
          if (topp_cutoff(w, V, p.topp * z, &wc, &ic, &cum, S) && wc >= minp) lo = wc, iLim = ic, zp = cum;
        }
        // The draw: the first kept token in id order at which the running
        // weight exceeds u·zp. Each thread owns a contiguous run of ids; a
        // scan of the runs' sums finds the run where it happens.
        const double target = p.u * zp;
        const int per = (V + NT - 1) / NT, i0 = tid * per, i1 = min(V, i0 + per);
        double mine = 0;
        int lastKept = -1;
        for (int i = i0; i < i1; i++) {
          const float e = w(i);
          if (e > lo || (e == lo && i <= iLim)) mine += (double)e, lastKept = i;
        }
        if (tid == 0) S.tok = 0x7fffffff, S.last = -1;
        const double excl = block_scan_double(mine, S);
        if (lastKept >= 0) atomicMax(&S.last, lastKept);
        if (mine > 0 && target < excl + mine) {
          double c = excl;
          for (int i = i0; i < i1; i++) {
            const float e = w(i);
            if (e > lo || (e == lo && i <= iLim)) {
              c += (double)e;
              if (target < c) {
                atomicMin(&S.tok, i);
                break;
              }
            }
          }
        }
        __syncthreads();
        tok = S.tok != 0x7fffffff ? S.tok : (S.last >= 0 ? S.last : top);
        __syncthreads();
      }
    }
    if (edits && wantLP) {
      // The chosen token's raw logit: the value saved by the first list
      // naming it, if any names it.
      if (tid == 0) S.found = 0x7fffffff;
      __syncthreads();
      const int nl = p.nbias + p.nseen + p.ngen;
      for (int e = tid; e < nl; e += NT) {
        const int id = e < p.nbias ? bid[e] : e < p.nbias + p.nseen ? seen[e - p.nbias] : gid[e - p.nbias - p.nseen];
        if (id == tok) atomicMin(&S.found, e);
      }
      __syncthreads();
    }
  }

  // 4. The chosen token's log-probability under the raw logits.
  if (tid == 0) {
    float raw = NEG_INF;
    if (tok >= 0 && tok < V) {
      raw = L[tok];
      if (edits && wantLP && S.found != 0x7fffffff) raw = ((const float*)(lists + p.off + 2 * p.nbias + p.nseen + 2 * p.ngen))[S.found];
    }
    o->token = tok;
    o->logprob = wantLP ? log_prob(raw, lse) : 0.f;
    o->ntop = ntop;
  }
}
