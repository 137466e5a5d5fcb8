#!/usr/bin/env bash
# Runs every reference generator on the GPU machine and packs the results into
# $OUT (or $1): fixtures.tgz (tokenizer, chat, model fixtures) and the demo
# models. Called through the device tool:
#   bash tests/reference/run_all.sh        (with OUT set by the tool)
# Each generator runs even if another fails; the exit code is non-zero if any did.
set -u
out=${1:-${OUT:?set OUT or pass a directory}}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
export PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
status=0
python3 -c 'import torch, transformers, tokenizers; print("torch", torch.__version__, "transformers", transformers.__version__, "tokenizers", tokenizers.__version__, "cuda", torch.cuda.is_available())'

demo_pid=""
if [ -z "${SKIP_DEMO:-}" ] && [ -f "$here/demo/run.sh" ]; then
  (DEMO_TGZ=0 bash "$here/demo/run.sh" "$work/demo" > "$out/demo.log" 2>&1; echo "demo exit $?" >> "$out/demo.log") &
  demo_pid=$!
fi

run() {
  local name=$1; shift
  echo "== $name"
  if ! timeout "${GEN_TIMEOUT:-240}" "$@" > "$work/$name.log" 2>&1; then
    echo "!! $name failed"; status=1
  fi
  tail -n 25 "$work/$name.log"
}
mkdir -p "$work/fixtures"
[ -z "${SKIP_FIXTURES:-}" ] && {
  run tokenizer python3 "$here/tokenizer_cases.py" "$work/fixtures/tokenizer"
  run chat python3 "$here/chat_cases.py" "$work/fixtures/chat"
  run models python3 "$here/make_fixtures.py" "$work/fixtures/qwen3"
  run hybrid python3 "$here/make_hybrid_fixtures.py" "$work/fixtures/hybrid"
  run sampling python3 "$here/../../engine/sample/testdata/hf_reference.py" "$work/fixtures/sample"
}
cp "$work"/*.log "$work/fixtures/" 2>/dev/null
tar czf "$out/fixtures.tgz" -C "$work/fixtures" .

if [ -n "$demo_pid" ]; then
  wait "$demo_pid"
  tail -n 40 "$out/demo.log"
  # One archive per model: each returned file must stay under 16 MB.
  for v in demo demo-xml; do
    [ -d "$work/demo/$v" ] && tar czf "$out/$v.tgz" -C "$work/demo" "$v"
  done
  cp "$work"/demo/*.txt "$out/" 2>/dev/null
fi
ls -la "$out"
exit $status
