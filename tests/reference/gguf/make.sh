#!/usr/bin/env bash
# Regenerates tests/testdata/gguf/llamacpp-demo.json: converts the demo model
# to every GGUF type with this checkout's `infernix convert` (and each type's
# embedding probe), then records llama.cpp's log-probs and tokenizations for
# each file. Runs on any x86-64
# Linux machine with Go, Node and the npm registry (no GPU).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$root" && go build -o "$work/infernix" ./cmd/infernix)
(cd "$here" && npm install --no-audit --no-fund --silent --ignore-scripts >/dev/null)
args=()
for t in f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k; do
  "$work/infernix" convert --model "$root/tests/testdata/models/demo" --out "$work/demo-$t.gguf" --type "$t" >/dev/null
  "$work/infernix" convert --model "$root/tests/testdata/models/demo" --out "$work/probe-$t.gguf" --type "$t" --embedding-probe >/dev/null
  args+=("$t=$work/demo-$t.gguf" "probe-$t=$work/probe-$t.gguf")
done
mkdir -p "$root/tests/testdata/gguf"
node "$here/llamacpp_ref.mjs" "$root/tests/testdata/gguf/llamacpp-demo.json" "${args[@]}"
