#!/usr/bin/env bash
# Per-kernel times of one graph-replayed Qwen3-8B decode step at 512 and at
# 32K context, through Nsight Compute (no clock control), on the GPU machine:
#   bash tests/device/profile.sh [OUTDIR]      (after run.sh build; carry bin/cuda)
# Writes ncu.csv and prints a table per kernel (count, total µs, mean µs,
# DRAM throughput % of peak).
# PROFILE_WHAT=prefill: the same table for one 4,096-token prefill;
# PROFILE_WHAT=lanes16: for one 16-lane decode step at 512 (cuBLASLt products).
# PROFILE_WHAT=gemv: Nsight's speed-of-light, memory, occupancy and warp-stall
# sections for the decode step's residual products (o_proj and down,
# gemvf_m2_*; run 7 measured them at 2.4 TB/s) into gemv-sections.txt.
# PROFILE_WHAT=attn: the same sections for the decode attention at 32K
# (attn_decode_tc*) into attn-sections.txt.
# PROFILE_WHAT=stalls: Nsight's full set, raw, for layer 0's products at 512
# and one decode attention at 32K; stalls.txt lists each kernel's time,
# throughput, occupancy and warp-stall reasons.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-${OUT:-/tmp/infernix-profile}}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export INFERNIX_KERNEL_CACHE=${INFERNIX_KERNEL_CACHE:-/tmp/infernix-kernels}
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
cd "$root/engine/backend/cuda"
what=${PROFILE_WHAT:-decode}
if [ "$what" = attn ]; then
  # The decode attention at 32K (the profiled step at 512 comes first: 36
  # launches skipped): throughput, occupancy and warp stalls.
  timeout ${PROFILE_TIMEOUT:-300} "$ncu" --profile-from-start off --clock-control none -k regex:attn_decode_tc --launch-skip 36 -c 2 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats \
    env INFERNIX_CUDA_BENCH="$root/tests/testdata/configs/qwen3-8b" INFERNIX_BENCH_PROFILE=1 \
    "$root/bin/cuda/cuda.test" -test.v -test.run 'TestBench' -test.timeout 280s > "$out/attn-sections.txt" 2>&1
  echo "ncu exit $?"
  grep -iE "attn_decode|Duration|DRAM Throughput|Memory Throughput|L2 Hit|L1/TEX Hit|Occupancy|stall|Registers|Issued|Eligible|Active Warps|Block Limit|spends|cycles" "$out/attn-sections.txt" | cut -c1-220 | head -90
  exit 0
fi
if [ "$what" = stalls ]; then
  # Every metric of Nsight's full set for the first decode step's products
  # (the five gemvf launches of layer 0 at 512: q|k|v, o_proj, gate|up,
  # down, and layer 1's q|k|v) and for one decode attention at 32K, as raw
  # CSV; stalls.txt lists per kernel its time, DRAM throughput, occupancy
  # and the warp-stall reasons, largest first.
  for k in "gemvf:0:5" "attn_decode_tc:36:1"; do
    IFS=: read -r re skip n <<< "$k"
    timeout ${PROFILE_TIMEOUT:-240} "$ncu" --profile-from-start off --clock-control none -k regex:$re --launch-skip $skip -c $n \
      --set full --csv --page raw --log-file "$out/raw-$re.csv" \
      env INFERNIX_CUDA_BENCH="$root/tests/testdata/configs/qwen3-8b" INFERNIX_BENCH_PROFILE=1 \
      "$root/bin/cuda/cuda.test" -test.v -test.run 'TestBench' -test.timeout 220s > "$out/stdout-$re.txt" 2>&1
    echo "ncu $re exit $?"
  done
  python3 - "$out" > "$out/stalls.txt" <<'PY'
import csv, glob, sys
for f in sorted(glob.glob(sys.argv[1] + "/raw-*.csv")):
    rows = list(csv.reader(l for l in open(f, errors="replace") if l.startswith('"')))
    if len(rows) < 3:
        print(f, "no rows"); continue
    hdr, units = rows[0], rows[1]
    for r in rows[2:]:
        d = dict(zip(hdr, r))
        print("==", d.get("Kernel Name", "?"), "grid", d.get("launch__grid_size"), "block", d.get("launch__block_size"),
              "regs", d.get("launch__registers_per_thread"))
        for m in ("gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram__bytes_read.sum",
                  "sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm__warps_active.avg.pct_of_peak_sustained_active",
                  "sm__cycles_active.avg", "smsp__issue_active.avg.pct_of_peak_sustained_active",
                  "smsp__warps_eligible.avg.per_cycle_active", "smsp__warps_active.avg.per_cycle_active",
                  "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum", "lts__t_sector_hit_rate.pct",
                  "l1tex__t_sector_hit_rate.pct", "smsp__inst_executed.sum"):
            if m in d: print(f"  {m} = {d[m]}")
        def pick(ok):
            st = []
            for k, v in d.items():
                if ok(k):
                    try: st.append((float(v.replace(",", "")), k))
                    except ValueError: pass
            return sorted(st, reverse=True)
        st = pick(lambda k: "issue_stalled" in k and k.endswith("per_issue_active.ratio")) or pick(lambda k: "issue_stalled" in k)
        for v, k in st[:14]:
            print(f"  {v:10.3f}  {k}")
PY
  cat "$out/stalls.txt" | cut -c1-200 | head -150
  exit 0
fi
if [ "$what" = gemv ]; then
  timeout ${PROFILE_TIMEOUT:-300} "$ncu" --profile-from-start off --clock-control none -k regex:gemvf_m2 -c 4 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats \
    env INFERNIX_CUDA_BENCH="$root/tests/testdata/configs/qwen3-8b" INFERNIX_BENCH_PROFILE=1 \
    "$root/bin/cuda/cuda.test" -test.v -test.run 'TestBench' -test.timeout 280s > "$out/gemv-sections.txt" 2>&1
  echo "ncu exit $?"
  grep -E "gemvf|Duration|DRAM Throughput|Memory Throughput|L2 Hit|Achieved Occupancy|Theoretical Occupancy|Stall|Registers" "$out/gemv-sections.txt" | head -80
  exit 0
fi
profile=1
[ "$what" = prefill ] && profile=prefill
[ "$what" = lanes16 ] && profile=lanes16
timeout ${PROFILE_TIMEOUT:-300} "$ncu" --profile-from-start off --clock-control none \
  --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,launch__grid_size,launch__block_size \
  --csv --page raw --log-file "$out/ncu.log" \
  env INFERNIX_CUDA_BENCH="$root/tests/testdata/configs/qwen3-8b" INFERNIX_BENCH_PROFILE=$profile \
  "$root/bin/cuda/cuda.test" -test.v -test.run 'TestBench' -test.timeout 280s > "$out/ncu.csv" 2> "$out/ncu.stderr"
echo "ncu exit $?"
tail -n 5 "$out/ncu.stderr" "$out/ncu.log" 2>/dev/null
python3 - "$out/ncu.log" "$what" <<'PY'
import csv, sys, collections
rows = list(csv.reader(l for l in open(sys.argv[1], errors="replace") if l.startswith('"')))
if not rows:
    sys.exit("no ncu rows")
hdr = rows[0]
def col(name):
    return next(i for i, h in enumerate(hdr) if h == name)
ki, ti = col("Kernel Name"), col("gpu__time_duration.sum")
di = col("dram__throughput.avg.pct_of_peak_sustained_elapsed")
bi = col("dram__bytes_read.sum")
gi = col("launch__grid_size")
data = [r for r in rows[1:] if r[ti].replace(".", "").replace(",", "").isdigit()]
# Decode: two steps, split where the per-step kernel sequence restarts (half
# the rows); prefill: one forward.
half = len(data) // 2
if sys.argv[2] in ("prefill", "lanes16"):
    parts = ((sys.argv[2], data),)
else:
    parts = (("ctx512", data[:half]), ("ctx32k", data[half:]))
for name, part in parts:
    agg = collections.OrderedDict()
    tot = 0.0
    for r in part:
        t = float(r[ti].replace(",", "")) / 1000.0  # ns -> us
        k = r[ki].split("(")[0][:48]
        a = agg.setdefault(k, [0, 0.0, 0.0, 0.0, r[gi]])
        a[0] += 1; a[1] += t; a[2] += float(r[di].replace(",", "") or 0) * t
        a[3] += float(r[bi].replace(",", "") or 0)
        tot += t
    print(f"== {name}: {len(part)} kernels, {tot:.0f} us of kernel time")
    print(f"{'kernel':48} {'n':>4} {'total us':>9} {'mean us':>8} {'dram%':>6} {'GB/s':>7} grid")
    for k, (n, t, dw, by, g) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        print(f"{k:48} {n:4d} {t:9.1f} {t/n:8.2f} {dw/t if t else 0:6.1f} {by/(t*1e3) if t else 0:7.0f} {g}")
PY
