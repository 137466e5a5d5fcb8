#!/usr/bin/env bash
# One device call on a two-GPU machine: the CUDA checks and benchmark on GPU 0
# while the demo corpus is prepared, then both demo models train (GPU 0 once
# the CUDA groups are done, GPU 1 at once). Results under $OUT/cuda, $OUT/demo.
#   COMBINED_GROUPS="driver ops attention model bench cli" bash tests/device/combined.sh
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mkdir -p "$OUT/cuda" "$OUT/demo"
rm -f /tmp/gpu0-free
(
  CUDA_VISIBLE_DEVICES=0 CUDA_GROUPS="${COMBINED_GROUPS:-driver ops attention model bench cli}" \
    bash tests/device/run.sh run "$OUT/cuda" > "$OUT/cuda/stdout.txt" 2>&1
  touch /tmp/gpu0-free
  # Groups that tolerate sharing GPU 0 with training (load time, not speed).
  if [ -n "${COMBINED_LATE_GROUPS:-}" ]; then
    mkdir -p "$OUT/cuda-late"
    CUDA_VISIBLE_DEVICES=0 CUDA_GROUPS="$COMBINED_LATE_GROUPS" bash tests/device/run.sh run "$OUT/cuda-late" > "$OUT/cuda-late/stdout.txt" 2>&1
  fi
) &
cuda_pid=$!
SKIP_FIXTURES=1 DEMO_WAIT_GPU0=/tmp/gpu0-free DEMO_TOTAL_SECONDS=${DEMO_TOTAL_SECONDS:-570} \
  DEMO_TRAIN_SECONDS=${DEMO_TRAIN_SECONDS:-360} bash tests/reference/run_all.sh "$OUT/demo" > "$OUT/demo/stdout.txt" 2>&1
wait $cuda_pid
echo "=== cuda"; tail -n 30 "$OUT/cuda/stdout.txt"; [ -f "$OUT/cuda-late/stdout.txt" ] && grep -E "^load |^decode |^prefill |\| load" "$OUT/cuda-late/stdout.txt"
echo "=== demo"; grep -E "RESULT|tool_fit|think_format|no_tool|add2|capital|GPUs|exit" "$OUT/demo/stdout.txt" "$OUT/demo/demo.log" 2>/dev/null | head -30
