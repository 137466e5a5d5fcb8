// Reference log-probs and tokenizations from llama.cpp for GGUF files that
// `infernix convert` wrote: llama.cpp decodes every block type its own way,
// so a difference in our reader's dequantisation, tensor names, metadata or
// tokenizer shows as a difference here.
//
// node llamacpp_ref.mjs OUT.json NAME=FILE.gguf [NAME=FILE.gguf ...]
//
// For each file: its SHA-256 (the Go test checks it converts the same
// bytes), the token ids of each string in STRINGS, and for each prompt in
// PROMPTS the natural log of the top-K next-token probabilities at every
// position (llama.cpp's softmax of its logits, no sampling options). A NAME
// starting with "probe-" is an embedding probe (`infernix convert
// --embedding-probe`): its one prompt is PROBE_IDS, tokens spread over the
// vocabulary, each position's logits a function of that token's row.
import {getLlama} from "node-llama-cpp";
import {createHash} from "node:crypto";
import {readFileSync, writeFileSync} from "node:fs";

const TOP = 10;
// Chat-formatted and plain text the demo model knows, with special tokens.
const PROMPTS = [
  "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nThe capital of France is Paris.<|im_end|>\n",
  "<|im_start|>user\nWhat is 17 + 25?<|im_end|>\n<|im_start|>assistant\n",
  "The weather in Tokyo is sunny, and the capital of Japan is Tokyo.",
];
const STRINGS = [
  "Hello, world!", "  two leading spaces\tand a tab\n\nnew lines", "numbers 1234567 and 3.14159",
  "café naïve 東京 🙂", "<|im_start|>user\nhi<|im_end|>", "don't I'LL we've", "<think>x</think><tool_call>{}</tool_call>",
];

const PROBE_IDS = Array.from({length: 160}, (_, i) => (i * 997 + 3) % 4096);

const [out, ...specs] = process.argv.slice(2);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const result = {generator: "tests/reference/gguf/llamacpp_ref.mjs", node_llama_cpp: "3.22.1", top: TOP, strings: STRINGS, models: {}};
for (const spec of specs) {
  const [name, path] = spec.split("=");
  const sha256 = createHash("sha256").update(readFileSync(path)).digest("hex");
  const model = await llama.loadModel({modelPath: path});
  const probe = name.startsWith("probe-");
  const entry = {sha256, tokenizations: STRINGS.map((s) => Array.from(model.tokenize(s, true))), prompts: []};
  for (const ids of probe ? [PROBE_IDS] : PROMPTS.map((text) => Array.from(model.tokenize(text, true)))) {
    const ctx = await model.createContext({contextSize: 512, threads: 2});
    const seq = ctx.getSequence();
    const res = await seq.controlledEvaluate(ids.map((t) => [t, {generateNext: {probabilities: true}}]));
    const top = res.map((r) => [...r.next.probabilities.entries()].slice(0, TOP).map(([t, p]) => [t, Math.round(Math.log(p) * 1e6) / 1e6]));
    entry.prompts.push({tokens: ids, top});
    await ctx.dispose();
  }
  await model.dispose();
  result.models[name] = entry;
  console.log(name, sha256.slice(0, 12));
}
writeFileSync(out, JSON.stringify(result) + "\n");
