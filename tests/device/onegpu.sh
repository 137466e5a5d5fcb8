#!/usr/bin/env bash
# One device call on a one-GPU machine, under 10 minutes: the speed groups
# alone on the GPU while the demo corpus is prepared on the CPU, then demo
# training beside the correctness groups (they measure no speed).
#   FIRST_GROUPS="bench ttft" LATE_GROUPS="ops model e2e engine" DEMO_VARIANTS=demo bash tests/device/onegpu.sh
# The device tool returns at most 8 files: $OUT gets one archive per trained
# model (<variant>.tgz) and logs.tgz (every log and bench JSON), nothing else.
# Needs bin/cuda unpacked (run.sh build, then the pack carried and untarred).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
out=${OUT:?set OUT}
work=$(mktemp -d)
go=$work/gpu-free
mkdir -p "$work/demo"
demo_pid=""
if [ -n "${DEMO_VARIANTS:-}" ]; then
  SKIP_FIXTURES=1 DEMO_WAIT_FILE=$go bash tests/reference/run_all.sh "$work/demo" > "$work/run_all.txt" 2>&1 &
  demo_pid=$!
fi
[ -n "${FIRST_GROUPS:-}" ] && CUDA_GROUPS="$FIRST_GROUPS" bash tests/device/run.sh run "$work/first" > "$work/first.txt" 2>&1
touch "$go"
# LATE_ENV="INFERNIX_CUDA_GEMVF=GF_KS=4": settings for the late groups alone.
[ -n "${LATE_GROUPS:-}" ] && env ${LATE_ENV:-} CUDA_GROUPS="$LATE_GROUPS" bash tests/device/run.sh run "$work/late" > "$work/late.txt" 2>&1
[ -n "$demo_pid" ] && wait "$demo_pid"
for v in ${DEMO_VARIANTS:-}; do [ -f "$work/demo/$v.tgz" ] && cp "$work/demo/$v.tgz" "$out/"; done
rm -f "$work/demo/"*.tgz
tar czf "$out/logs.tgz" -C "$work" .
for f in first late; do [ -f "$work/$f.txt" ] && { echo "=== $f"; sed -n '/^| group/,$p' "$work/$f.txt"; grep -E -- '--- FAIL' "$work/$f.txt" | head -20; }; done
# The timelines (gemvtime, attntime, steptime) and the processes' figures, where run.
[ -f "$work/first/log.txt" ] && grep -E "^Benchmark|^read peak |^moeserve |^== attntime|^attn timing|^gemv timing|^step timing|^product bench|recurrent bench" "$work/first/log.txt" | head -120
for j in "$work"/first/defvar*/bench-*.json "$work"/first/envvar*/bench-*.json; do
  [ -f "$j" ] && echo "$(basename "$(dirname "$j")") [$(cat "$(dirname "$j")"/*.txt 2>/dev/null)] $(grep -oE '"decode_1lane_ctx(512|32k)_tok_s": *[0-9.]*' "$j" | tr '\n' ' ')"
done
[ -f "$work/run_all.txt" ] && { echo "=== demo"; grep -E "RESULT|^tool_fit|^no_tool|^add2|^capital|^think_format|word split|WARN|exit|Error" "$work/run_all.txt" | head -30; }
ls -la "$out"
