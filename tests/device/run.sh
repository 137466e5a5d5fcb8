#!/usr/bin/env bash
# CUDA backend checks and benchmarks on the GPU machine.
#
#   bash tests/device/run.sh build   # here: builds bin/cuda/cuda.test, bin/cuda/driver.test, bin/infernix (CGO-free)
#   bash tests/device/run.sh pack    # here, after build: bin/pack/cuda.tar.xz (xz -9e, ~10 MB: the device tool
#                                    #   carries 64 MiB with the tracked tree's ~56); carry ["bin/pack"] and on the
#                                    #   machine first: tar xJf bin/pack/cuda.tar.xz -C bin. PACK_BINS="cuda.test"
#                                    #   packs only those (~2 MB: the bench, timing and op groups need no more)
#   bash tests/device/run.sh run     # there, through the device tool with carry=["bin/cuda"]:
#                                    #   export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH; bash tests/device/run.sh run
#
# `run` runs each group of tests in its own process (an illegal address
# poisons a CUDA context for good), then the benchmark, prints a table last
# and writes log.txt, device.txt and bench-*.json under $OUT (or $1 when given).
# CUDA_GROUPS (space-separated: driver ops attention model hybrid hybridbench recheck fixvar fixvar2 fixnew fixbf16 graphs samplebench bench walkprof pchain readpeak gemvtime attntime steptime defvars envvars moeops moedecode moeserve moevars moesteps hybridab moebench moe hf hf32 load cli ttft ttftold e2e engine mlp oproj) picks groups;
# hf first generates random real-shape checkpoints and transformers references
# (tests/device/hf_compare.py), then compares (TestHFReference).
set -u
mode=${1:-run}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
if [ "$mode" = build ]; then
  set -e
  mkdir -p bin/cuda
  CGO_ENABLED=0 go test -ldflags="-s -w" -c -o bin/cuda/cuda.test ./engine/backend/cuda
  CGO_ENABLED=0 go test -ldflags="-s -w" -c -o bin/cuda/driver.test ./engine/backend/cuda/driver
  CGO_ENABLED=0 go build -ldflags="-s -w" -o bin/cuda/infernix ./cmd/infernix || echo "bin/infernix not built (the cli group will be skipped)"
  CGO_ENABLED=0 go test -ldflags="-s -w" -c -o bin/cuda/e2e.test ./tests/e2e
  CGO_ENABLED=0 go test -ldflags="-s -w" -c -o bin/cuda/engine.test ./engine
  (git rev-parse --short HEAD 2>/dev/null || echo uncommitted) > bin/cuda/COMMIT
  ls -la bin/cuda
  exit 0
fi

if [ "$mode" = pack ]; then
  set -e
  mkdir -p bin/pack
  bins=""
  for f in ${PACK_BINS:-infernix cuda.test e2e.test engine.test}; do bins="$bins cuda/$f"; done
  tar cf - -C bin $bins cuda/COMMIT | xz -9e -T0 > bin/pack/cuda.tar.xz
  ls -la bin/pack
  exit 0
fi

out=${2:-${OUT:-/tmp/infernix-device-out}}
mkdir -p "$out"
log=$out/log.txt
: > "$log"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export INFERNIX_KERNEL_CACHE=${INFERNIX_KERNEL_CACHE:-/tmp/infernix-kernels}
export INFERNIX_COMMIT=$(cat bin/cuda/COMMIT 2>/dev/null || echo unknown)
groups=${CUDA_GROUPS:-driver ops attention model hybrid fixnew fixbf16 bench hf hf32 cli}

{
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version,clocks.sm,clocks.mem --format=csv
  ls /usr/local/cuda/lib64 2>/dev/null | grep -E '^lib(nvrtc|cublasLt|cuda)' | head
  echo "commit $INFERNIX_COMMIT"
} > "$out/device.txt" 2>&1
cat "$out/device.txt"

rows=()
group() {
  local name=$1 limit=$2; shift 2
  case " $groups " in *" $name "*) ;; *) return ;; esac
  echo "== $name" | tee -a "$log"
  local t0=$SECONDS
  ( cd "$root/engine/backend/cuda" && timeout "$limit" "$@" ) > "$out/.cur" 2>&1
  local rc=$?
  cat "$out/.cur" >> "$log"
  local pass fail skip
  pass=$(grep -c -- '^--- PASS\|^    --- PASS' "$out/.cur")
  fail=$(grep -c -- '--- FAIL' "$out/.cur")
  skip=$(grep -c -- '--- SKIP' "$out/.cur")
  grep -E -- '--- FAIL|panic|Error|error' "$out/.cur" | head -n 40
  tail -n 8 "$out/.cur"
  rows+=("$(printf '| %-10s | %3d | %4d | %4d | %4d | %4ds |' "$name" "$rc" "$pass" "$fail" "$skip" $((SECONDS - t0)))")
  rm -f "$out/.cur"
}

T=$root/bin/cuda/cuda.test
group driver 60 "$root/bin/cuda/driver.test" -test.v
group ops 300 "$T" -test.v -test.run 'TestEmbed|TestRMSNorm|TestMatMul|TestAddSwiGLUGather|TestRoPE|TestMoE|TestMoEGrouped|TestFused|TestHostCopies|TestKVBlockCopy|TestSampleRows|TestShadow|TestGemvfVariants'
group attention 300 "$T" -test.v -test.run 'TestAttention|TestDecodeSplits'
group model 240 "$T" -test.v -test.run 'TestModelRandom|TestModelFuseModes|TestModelSkinny|TestGraphsMatchEager|TestFixtures|TestGGUFFixtures|TestAttnPrepFold|TestAttnDyn|TestModelMLPFused'
# mlp (not in the default groups): the one-launch MLP (INFERNIX_CUDA_MLP=fused,
# kernels/mlp.cu) against the CPU: a layer's operators, a model, Qwen3-8B's shape.
group mlp 150 "$T" -test.v -test.run 'TestModelMLPFused|TestFusedLayer'
# oproj (not in the default groups): the split merge folded into the
# o-projection (INFERNIX_CUDA_OPROJ=fold, attn_oproj in kernels/attention.cu)
# against the CPU: a layer's attention half, a model, and the fusion modes.
group oproj 150 "$T" -test.v -test.run 'TestAttnOProjFold|TestModelOProjFold|TestFusedAttention'
# graphs (not in the default groups): the graph replays against eager
# forwards and the models and sampling that replay them, a short subset of
# model and ops.
group graphs 150 "$T" -test.v -test.run 'TestGraphsMatchEager|TestModelRandom|TestFixtures|TestSampleRows'
# samplebench (not in the default groups): one SampleRows call on a Qwen3
# row per kernel build and sampling parameters (sample_bench_test.go).
group samplebench 120 "$T" -test.run '^$' -test.bench 'BenchmarkSampleRows' -test.benchtime 300x -test.benchmem
# hybrid: the hybrid models' operators (kernels/recurrent.cu) against the
# CPU backend, random Qwen3.5 / Qwen3.5-MoE / Qwen3-Next models of real head
# dims, and every committed fixture (the hybrid ones included).
group hybrid 240 "$T" -test.v -test.run 'TestRecurrentOps|TestModelHybrid|TestFixtures'
# recheck (not in the default groups): the model checks against the CPU
# three times over (fresh random prompts and weights each time), and the
# speculative server against the plain one.
group recheck 240 "$T" -test.v -test.count 3 -test.run 'TestModelHybrid|TestFixtures|TestModelRandom|TestGGUFFixtures'
[ -x "$root/bin/cuda/e2e.test" ] && group recheck 60 env INFERNIX_TEST_DEVICE=cuda sh -c "cd '$root/tests/e2e' && '$root/bin/cuda/e2e.test' -test.v -test.run 'TestSpeculativeDecoding'"
# hybridab (not in the default groups): TestModelHybrid HYBRIDAB_COUNT (24)
# times with the fused MoE decode and, unless HYBRIDAB_INDEXED=0, as many
# with the indexed one (run 32 saw 3 failing subtests of 54 fused, none of
# 48 indexed, against the formats reference; run 33, 0 of 72 and 2 of 72).
group hybridab 200 "$T" -test.v -test.count "${HYBRIDAB_COUNT:-24}" -test.run 'TestModelHybrid'
[ "${HYBRIDAB_INDEXED:-1}" != 0 ] && group hybridab 200 env INFERNIX_CUDA_MOE_FUSED=0 "$T" -test.v -test.count "${HYBRIDAB_COUNT:-24}" -test.run 'TestModelHybrid'
# (and the conv and delta rule alone at Qwen3-Next's shapes: lines
# "recurrent bench ..." in the log)
group hybrid 60 env INFERNIX_BENCH_GDN=1 "$T" -test.v -test.run 'TestRecurrentBench'
# fixvar: the fixtures again with one part switched back at a time (bisects a
# precision change): unfused operators, the old decode attention kernels.
group fixvar 60 env INFERNIX_CUDA_FUSE=0 "$T" -test.v -test.run 'TestFixtures'
group fixvar2 60 env INFERNIX_CUDA_DECODE_ATTN=old "$T" -test.v -test.run 'TestFixtures'
# fixnew: the fixtures and the random models with the switches prepared for
# issue 6 on (split-K products, deep decode attention); the kernels' own
# checks run in the ops/attention/model groups (wide*, deep* subtests).
group fixnew 120 env INFERNIX_CUDA_GEMV_WIDE=1 INFERNIX_CUDA_ATTN_DEEP=1 "$T" -test.v -test.run 'TestFixtures|TestModelRandom|TestGraphsMatchEager'
# fixbf16: the fixtures and the random models over a bf16 KV cache (the
# default was bf16 until run 10; f16 is now, see attention.go
# kvDTypeFromEnv); the f16 kernels' own checks are TestAttention's f16-*
# modes, TestAttentionKVF16 (attention group) and TestModelFuseModes/kvf16*.
group fixbf16 120 env INFERNIX_CUDA_KV=bf16 "$T" -test.v -test.run 'TestFixtures|TestModelRandom'
# (up to ~2 minutes: it compiles six variants of the decode products.)
group bench 300 env INFERNIX_CUDA_BENCH="$root/tests/testdata/configs/qwen3-8b" INFERNIX_BENCH_OUT="$out" "$T" -test.v -test.run 'TestBench' -test.timeout 290s
# walkprof (not in the default groups): the bench's 512 decode, then a CPU
# profile (5 kHz) of 2,000 more steps: where the host's walk of a replayed
# step goes ($out/walk.prof; read it here with the same cuda.test).
group walkprof 200 env INFERNIX_CUDA_BENCH="$root/tests/testdata/configs/qwen3-8b" INFERNIX_BENCH_WALK_PROFILE="$out/walk.prof" INFERNIX_BENCH_OUT="$out" "$T" -test.v -test.run 'TestBench' -test.timeout 190s
# pchain (not in the default groups): the persistent product chain
# (kernels/pchain.cu, an experiment): TestPchain checks it against float64
# on a layer's products, TestPchainBench times Qwen3-8B's 36 layers of
# products and the LM head as the engine's fused kernels and as the chain
# (one launch, a launch a layer), each variant; lines "product bench ..." in
# the log, figures in $out/pchain.json.
# readpeak (not in the default groups): how fast the memory reads at all
# (kernels/probe.cu, TestReadPeak): read_peak's variants over 4 GiB, the
# copy, and the fused product over the same bytes; figures in the log
# ("read peak ...") and $out/readpeak.json.
group readpeak 120 env INFERNIX_BENCH_READPEAK=1 INFERNIX_BENCH_OUT="$out/readpeak.json" "$T" -test.v -test.run 'TestReadPeak' -test.timeout 110s
group pchain 300 env INFERNIX_BENCH_PCHAIN=1 INFERNIX_BENCH_OUT="$out/pchain.json" "$T" -test.v -test.run 'TestPchain' -test.timeout 290s
# gemvtime (not in the default groups): each decode product of Qwen3-8B
# alone with GF_TIMING, its warps' timeline summarised (ramp, first-load
# latency, when the warps end, the tail); lines "gemv timing ..." in the log,
# figures in $out/gemvtime/.
mkdir -p "$out/gemvtime"
group gemvtime 120 env INFERNIX_BENCH_GEMV_TIMING=1 INFERNIX_CUDA_BENCH="$root/tests/testdata/configs/qwen3-8b" INFERNIX_BENCH_OUT="$out/gemvtime" "$T" -test.v -test.run 'TestBench' -test.timeout 110s
# attntime (not in the default groups): the folded decode attention's
# block timeline (entry, PDL wait, first tile, main loop end, the merge's
# phases, exit) at 640 and 32K, graph-replayed, every module compiled with
# ATTN_TIMING=1 and, a process each, the defines of each entry of
# ATTNTIME_DEFINES (';' between processes, "DM_ASYNC=0;ATTN_NEWROW=0";
# default: one process with none); lines "attn timing ..." in the log after
# "== attntime [defines]", figures in $out/attntimeN/.
case " $groups " in *" attntime "*)
  IFS=';' read -r -a attn_specs <<< "${ATTNTIME_DEFINES:-}"
  [ ${#attn_specs[@]} -eq 0 ] && attn_specs=("")
  for i in "${!attn_specs[@]}"; do
    mkdir -p "$out/attntime$i"
    echo "== attntime [${attn_specs[$i]}]" >> "$log"
    echo "${attn_specs[$i]}" > "$out/attntime$i/defines.txt"
    group attntime 120 env INFERNIX_CUDA_DEFINES="ATTN_TIMING=1 ${attn_specs[$i]}" INFERNIX_BENCH_ATTN_TIMING=1 INFERNIX_BENCH_STOP=32k INFERNIX_CUDA_BENCH="$root/tests/testdata/configs/qwen3-8b" INFERNIX_BENCH_OUT="$out/attntime$i" "$T" -test.v -test.run 'TestBench' -test.timeout 110s
  done
;; esac
# steptime (not in the default groups): every launch of a graph-replayed
# decode step at 640 and 32K positions and of a 16-lane step at 520 (its
# first and last block's entry, PDL_WAIT return and exit; a launch after
# cuBLASLt products is named "[lt] kernel" and holds their time), every
# module compiled with STEP_TIMING=2 (the first entry and wait and the last
# exit; STEPTIME_LEVEL=1: both ends of each) and STEPTIME_DEFINES; what each
# kernel adds to the step in lines "step timing ..." of the log, the
# launches in $out/steptime/.
mkdir -p "$out/steptime"
group steptime 120 env INFERNIX_CUDA_DEFINES="STEP_TIMING=${STEPTIME_LEVEL:-2} ${STEPTIME_DEFINES:-}" INFERNIX_BENCH_STEP_TIMING=1 INFERNIX_BENCH_STOP=32k INFERNIX_CUDA_BENCH="$root/tests/testdata/configs/qwen3-8b" INFERNIX_BENCH_OUT="$out/steptime" "$T" -test.v -test.run 'TestBench' -test.timeout 110s
# defvars and envvars (not in the default groups): decode at 512 and 32K
# only, a process per entry of a list (';' between processes), with a
# process of the defaults first and last, for the drift between processes.
# defvars: BENCH_DEFINES ("A=1;B=2 C=3"), every module compiled with the
# entry's defines (INFERNIX_CUDA_DEFINES: kernel tunables such as
# PDL_TRIGGER or DM_UNROLL); JSON and defines.txt under $out/defvarN/.
# envvars: BENCH_ENVS ("INFERNIX_CUDA_GEMV_WAVE=0;;INFERNIX_CUDA_GEMVF=GF_KS=1",
# spaces between variables; an empty entry is the defaults); JSON and
# env.txt under $out/envvarN/.
bench_processes() {
  local name=$1 prefix=$2 kind=$3 list=$4 i dir
  case " $groups " in *" $name "*) ;; *) return ;; esac
  local -a specs vars
  IFS=';' read -r -a specs <<< "$list"
  specs=("" "${specs[@]}" "")
  for i in "${!specs[@]}"; do
    dir="$out/$prefix$i"
    mkdir -p "$dir"
    echo "${specs[$i]}" > "$dir/$kind.txt"
    if [ "$kind" = defines ]; then
      vars=("INFERNIX_CUDA_DEFINES=${specs[$i]}")
    else
      read -r -a vars <<< "${specs[$i]}"
    fi
    group "$name" 150 env "${vars[@]}" INFERNIX_BENCH_STOP=32k INFERNIX_CUDA_BENCH="$root/tests/testdata/configs/qwen3-8b" INFERNIX_BENCH_OUT="$dir" "$T" -test.v -test.run 'TestBench' -test.timeout 140s
  done
}
bench_processes defvars defvar defines "${BENCH_DEFINES:-}"
bench_processes envvars envvar env "${BENCH_ENVS:-}"
# moebench and moe (not in the default groups): the grouped MoE path
# (issue 6; the default since run 13, INFERNIX_CUDA_MOE_GROUPED=0 turns it
# off) on the Qwen3-30B-A3B config, random weights made on the device, 12
# of its 48 layers (INFERNIX_BENCH_LAYERS; the ratio is per layer: 16 GB
# instead of 61): a 4,096-token prefill grouped vs indexed (TestBench stops
# after it); then the op test and the random MoE models and fixtures with
# the indexed path, which the other groups no longer take.
group moebench 200 env INFERNIX_CUDA_BENCH="$root/tests/testdata/configs/qwen3-30b-a3b" INFERNIX_BENCH_LAYERS=12 INFERNIX_BENCH_MOE_GROUPED=1 INFERNIX_BENCH_OUT="$out" "$T" -test.v -test.run 'TestBench' -test.timeout 190s
# moeops: the MoE operator tests alone (the fused decode path of
# kernels/moe.cu against the indexed one and the CPU, the grouped path).
group moeops 120 "$T" -test.v -test.run 'TestMoE|TestWeightSlabs'
# moedecode: decode of the whole Qwen3-30B-A3B config (48 layers, random
# weights made on the device, 61 GB; a small KV cache so that it fits 80 GB)
# at 512 positions, one lane, 4 and 16, the fused MoE path (kernels/moe.cu)
# grouped by expert and token by token, and the indexed one, in turn
# (benchMoEDecode).
group moedecode 240 env INFERNIX_CUDA_BENCH="$root/tests/testdata/configs/qwen3-30b-a3b" INFERNIX_BENCH_KV_BLOCKS=300 INFERNIX_BENCH_MOE_DECODE=1 INFERNIX_BENCH_OUT="$out" "$T" -test.v -test.run 'TestBench' -test.timeout 230s
# moevars: moedecode a process per entry of MOE_VARIANTS (';' between
# processes; kernels/moe.cu's defines through INFERNIX_CUDA_MOE_DEFINES,
# "MOE_UG=2 MOE_GU_MINB=6"), the defaults first and last; JSON and
# defines.txt under $out/moevarN/.
case " $groups " in *" moevars "*)
  IFS=';' read -r -a moe_specs <<< "${MOE_VARIANTS:-}"
  moe_specs=("" "${moe_specs[@]}" "")
  for i in "${!moe_specs[@]}"; do
    mkdir -p "$out/moevar$i"
    echo "${moe_specs[$i]}" > "$out/moevar$i/defines.txt"
    group moevars 150 env INFERNIX_CUDA_MOE_DEFINES="${moe_specs[$i]}" INFERNIX_CUDA_BENCH="$root/tests/testdata/configs/qwen3-30b-a3b" INFERNIX_BENCH_KV_BLOCKS=300 INFERNIX_BENCH_MOE_DECODE=1 INFERNIX_BENCH_OUT="$out/moevar$i" "$T" -test.v -test.run 'TestBench' -test.timeout 140s
  done
;; esac
# moesteps: every launch of a graph-replayed one-lane decode step of the
# whole Qwen3-30B-A3B config, fused and indexed (benchMoEDecode), kernels
# compiled with STEP_TIMING=2; lines "step timing ..." in the log.
group moesteps 150 env INFERNIX_CUDA_DEFINES="STEP_TIMING=2" INFERNIX_BENCH_STEP_TIMING=1 INFERNIX_CUDA_BENCH="$root/tests/testdata/configs/qwen3-30b-a3b" INFERNIX_BENCH_KV_BLOCKS=300 INFERNIX_BENCH_MOE_DECODE=1 INFERNIX_BENCH_OUT="$out" "$T" -test.v -test.run 'TestBench' -test.timeout 140s
group moe 120 env INFERNIX_CUDA_MOE_GROUPED=0 "$T" -test.v -test.run 'TestMoEGrouped|TestModelRandom|TestGraphsMatchEager|TestFixtures'
if case " $groups " in *" hf "*) ;; *) false ;; esac; then
  echo "== hf reference generation" | tee -a "$log"
  PYTHONUNBUFFERED=1 timeout 150 python3 "$root/tests/device/hf_compare.py" /tmp/infernix-hf >> "$log" 2>&1
  echo "hf_compare.py exit $?" | tee -a "$log"
  tail -n 12 "$log"
fi
group hf 110 env INFERNIX_HF_DIR=/tmp/infernix-hf "$T" -test.v -test.run 'TestHFReference' -test.timeout 100s
# The same with f32 activations in every product and the split attention
# kernel: separates bf16 rounding of prefill activations from other errors.
group hf32 110 env INFERNIX_HF_DIR=/tmp/infernix-hf INFERNIX_CUDA_GEMV_MAX=100000 INFERNIX_CUDA_ATTN=split "$T" -test.v -test.run 'TestHFReference' -test.timeout 100s
# load: a real 16 GB Qwen3-8B-shaped safetensors directory written here
# (random BF16), read once into the page cache, then loaded and benchmarked
# through the engine (`infernix bench` prints load_s).
if case " $groups " in *" load "*) ;; *) false ;; esac && [ -x "$root/bin/cuda/infernix" ]; then
  echo "== load: writing /tmp/infernix-q8b" | tee -a "$log"
  [ -f /tmp/infernix-q8b/model.safetensors.index.json ] || timeout 200 "$root/bin/cuda/infernix" synth --model "$root/tests/testdata/configs/qwen3-8b" --out /tmp/infernix-q8b 2>&1 | tee -a "$log"
  cat /tmp/infernix-q8b/*.safetensors > /dev/null
fi
[ -d /tmp/infernix-q8b ] && group load 120 "$root/bin/cuda/infernix" bench --device cuda --model /tmp/infernix-q8b --prompt-tokens 512 --decode-tokens 64
# gguf (not in the default groups): the load group's directory converted to
# a Q8_0 GGUF file here (`infernix convert`), then loaded (dequantized to
# bf16 for the fast products) and benchmarked through the engine.
if case " $groups " in *" gguf "*) ;; *) false ;; esac && [ -x "$root/bin/cuda/infernix" ]; then
  [ -f /tmp/infernix-q8b/model.safetensors.index.json ] || timeout 200 "$root/bin/cuda/infernix" synth --model "$root/tests/testdata/configs/qwen3-8b" --out /tmp/infernix-q8b 2>&1 | tee -a "$log"
  echo "== gguf: converting /tmp/infernix-q8b to Q8_0" | tee -a "$log"
  [ -f /tmp/infernix-q8b.gguf ] || timeout 200 "$root/bin/cuda/infernix" convert --model /tmp/infernix-q8b --out /tmp/infernix-q8b.gguf --type q8_0 2>&1 | tee -a "$log"
  cat /tmp/infernix-q8b.gguf > /dev/null
fi
[ -f /tmp/infernix-q8b.gguf ] && group gguf 150 "$root/bin/cuda/infernix" bench --device cuda --model /tmp/infernix-q8b.gguf --prompt-tokens 512 --decode-tokens 64
# ttft (issue 9): a 4,096-token prompt through the scheduler, computed in
# full, then with all but its last block from the prefix cache (one-pass
# prefill: chunk and batch limits at the prompt length).
ttft=("$root/bin/cuda/infernix" bench --device cuda --synthetic-weights --model "$root/tests/testdata/configs/qwen3-8b" --prompt-tokens 4096 --decode-tokens 16 --ttft --prefill-chunk 4096 --max-batch-tokens 4096)
[ -x "$root/bin/cuda/infernix" ] && group ttft 120 "${ttft[@]}"
# hybridbench (not in the default groups): Qwen3-Next-80B-A3B shapes cut to
# HYBRID_LAYERS (default 8) of its 48 layers (the 160 GB of BF16 weights do
# not fit one H200), random weights: decode at 512 and prefill of 4,096
# through the engine; JSON in $out/hybridbench-*.json.
if case " $groups " in *" hybridbench "*) ;; *) false ;; esac && [ -x "$root/bin/cuda/infernix" ]; then
  hl=${HYBRID_LAYERS:-8}
  mkdir -p /tmp/infernix-q3next
  python3 -c "import json,sys; c=json.load(open(sys.argv[1])); n=int(sys.argv[2]); c['num_hidden_layers']=n; c['layer_types']=c['layer_types'][:n]; json.dump(c,open('/tmp/infernix-q3next/config.json','w'))" "$root/tests/testdata/configs/qwen3-next-80b-a3b/config.json" "$hl"
  group hybridbench 300 sh -c "'$root/bin/cuda/infernix' bench --device cuda --synthetic-weights --model /tmp/infernix-q3next --prompt-tokens 512 --decode-tokens 64 --json > '$out/hybridbench-512.json' && cat '$out/hybridbench-512.json' && '$root/bin/cuda/infernix' bench --device cuda --synthetic-weights --model /tmp/infernix-q3next --prompt-tokens 4096 --decode-tokens 32 --prefill-chunk 4096 --max-batch-tokens 4096 --json > '$out/hybridbench-4096.json' && cat '$out/hybridbench-4096.json'"
fi
# moeserve (not in the default groups): many lanes decoding a MoE model
# through the real server (bench-serve, streaming completions, random
# weights, 16 clients), with the grouped MoE decode (the default) and with
# it off (INFERNIX_CUDA_MOE_GROUP_T=0), alternating: Qwen3-Next-80B-A3B's
# shapes (512 experts, 10 of them a token) cut to HYBRID_LAYERS layers, and
# Qwen3-30B-A3B's (128 experts) cut to MOE_LAYERS (default 16), MOESERVE_ROUNDS times (default 1). The configs
# get the real Qwen3 tokenizer; JSON in $out/moeserve-*.json.
if case " $groups " in *" moeserve "*) ;; *) false ;; esac && [ -x "$root/bin/cuda/infernix" ]; then
  cut_config() { # src dst layers
    mkdir -p "$2"
    cp "$root/tests/testdata/qwen3-tokenizer/tokenizer.json" "$root/tests/testdata/qwen3-tokenizer/tokenizer_config.json" "$2/"
    python3 -c "import json,sys; c=json.load(open(sys.argv[1])); n=int(sys.argv[2]); c['num_hidden_layers']=n; c['layer_types']=c.get('layer_types',[])[:n] or None; c={k:v for k,v in c.items() if v is not None}; json.dump(c,open(sys.argv[3],'w'))" "$1/config.json" "$3" "$2/config.json"
  }
  cut_config "$root/tests/testdata/configs/qwen3-next-80b-a3b" /tmp/infernix-serve-q3next "${HYBRID_LAYERS:-8}"
  cut_config "$root/tests/testdata/configs/qwen3-30b-a3b" /tmp/infernix-serve-q3moe "${MOE_LAYERS:-16}"
  # (a script of its own: group runs its command under timeout, which
  # cannot call a shell function)
  cat > /tmp/infernix-moeserve.sh <<SERVE
set -e
for m in q3next q3moe; do
  for round in \$(seq ${MOESERVE_ROUNDS:-1}); do
    for mode in grouped:4 token:0; do
      tag=\$m-\${mode%%:*}-\$round
      INFERNIX_CUDA_MOE_GROUP_T=\${mode#*:} "$root/bin/cuda/infernix" bench-serve --device cuda --synthetic-weights \\
        --model /tmp/infernix-serve-\$m --endpoint completions --clients 16 --requests 48 --prompt-tokens 256 \\
        --max-tokens 96 --json > "$out/moeserve-\$tag.json"
      echo "moeserve \$tag \$(cat "$out/moeserve-\$tag.json")"
    done
  done
done
SERVE
  group moeserve 400 bash /tmp/infernix-moeserve.sh
fi
# ttftold: the same with sampling on the host and no KV block copier (the
# defaults before run 11).
[ -x "$root/bin/cuda/infernix" ] && group ttftold 120 env INFERNIX_CUDA_SAMPLE=0 INFERNIX_CUDA_KV_COPY=0 "${ttft[@]}"
# e2e: the demo-model end-to-end tests (real server, engine, chat APIs) on
# the GPU (sampling on the device and the KV copier, the defaults).
[ -x "$root/bin/cuda/e2e.test" ] && group e2e 120 env INFERNIX_TEST_DEVICE=cuda sh -c "cd '$root/tests/e2e' && '$root/bin/cuda/e2e.test' -test.v -test.run 'TestDemo|TestConstrained|TestToolCallsConstrained|TestGuidedOutputs|TestPrefixCacheMetrics|TestSharedPrefixSnapshot|TestSpeculativeDecoding'"
# engine: the prefix cache across an engine restart (blocks read back from
# Badger into the device pool through the KV copier).
[ -x "$root/bin/cuda/engine.test" ] && group engine 120 env INFERNIX_TEST_DEVICE=cuda sh -c "cd '$root/engine' && '$root/bin/cuda/engine.test' -test.v -test.run 'TestPrefixAcrossRestarts'"
[ -x "$root/bin/cuda/infernix" ] && group cli 60 "$root/bin/cuda/infernix" bench --device cuda --synthetic-weights --model "$root/tests/testdata/configs/qwen3-8b" --prompt-tokens 512 --decode-tokens 64

echo
echo "| group      |  rc | pass | fail | skip |  time |"
echo "|------------|-----|------|------|------|-------|"
printf '%s\n' "${rows[@]}"
for f in "$out"/bench-*.json "$out"/defvar*/bench-*.json; do
  [ -f "$(dirname "$f")/defines.txt" ] && echo && echo "defines: '$(cat "$(dirname "$f")/defines.txt")'"
  [ -f "$f" ] && python3 - "$f" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"\nbench {r.get('model')} on {r.get('device')}")
targets = {"decode_1lane_ctx512_tok_s": 250, "decode_1lane_ctx32k_tok_s": 180, "prefill_4096_tok_s": 30000, "decode_16lanes_ctx512_tok_s": 2000}
# The targets first, then every other figure the bench recorded (its
# ablations change from run to run), in name order.
for k, t in [*targets.items(), *[(k, None) for k in sorted(r) if k.endswith("_tok_s") and k not in targets]]:
    v = r.get(k)
    if v is None:
        print(f"| {k:34s} |        – |")
        continue
    k = k.removesuffix("_tok_s")
    mark = "" if t is None else ("met" if v >= t else f"target {t}")
    print(f"| {k:34s} | {v:9.1f} | {mark}")
if r.get("devsample_error"):
    print("device sampling failed:", r["devsample_error"])
print(f"copy bandwidth {r.get('copy_bandwidth_gb_s', 0):.0f} GB/s, decode roofline {r.get('decode_roofline_tok_s', 0):.0f} tok/s, graphs replayed {r.get('graph_replays')}, captured {r.get('graph_captures')}, fallbacks {r.get('graph_fallbacks')}")
PY
done
