// Provisional fixture generator: HF tokenizers' Rust library through its npm bindings.
// Usage (outside the repo): npm install tokenizers@0.23.2, then
//   python3 tests/reference/tokenizer_cases.py --texts-only OUT
//   node node_generate.js OUT/texts.json tests/testdata/qwen3-tokenizer/tokenizer.json OUTDIR
const fs = require('fs');
const path = require('path');
const {Tokenizer} = require('tokenizers');
const version = require('tokenizers/package.json').version;
const [textsPath, tokPath, outdir] = process.argv.slice(2);
const texts = JSON.parse(fs.readFileSync(textsPath, 'utf8'));
const raw = fs.readFileSync(tokPath, 'utf8');
const generator = `node tokenizers@${version} (npm bindings of the HF Rust library; provisional, to be replaced by the python run)`;

function applyPatch(tok, patch) {
  for (const k of ['pre_tokenizer', 'normalizer']) if (k in patch) tok[k] = patch[k];
  if (patch.merges_as_strings) tok.model.merges = tok.model.merges.map(m => Array.isArray(m) ? m.join(' ') : m);
  if ('ignore_merges' in patch) tok.model.ignore_merges = patch.ignore_merges;
  if ('added_tokens_append' in patch) tok.added_tokens = tok.added_tokens.concat(patch.added_tokens_append);
  return tok;
}
async function encodeAll(tk, list) {
  const out = [];
  for (const text of list) {
    const e = await tk.encode(text, null, {addSpecialTokens: false});
    const ids = Array.from(e.getIds());
    out.push({text, ids, decoded: await tk.decode(ids, false), decoded_skip: await tk.decode(ids, true)});
  }
  return out;
}
(async () => {
  const tk = Tokenizer.fromString(raw);
  const cases = await encodeAll(tk, texts.cases);
  const decode_cases = [];
  for (const ids of texts.decode_ids) {
    decode_cases.push({ids, decoded: await tk.decode(ids, false), decoded_skip: await tk.decode(ids, true)});
  }
  fs.writeFileSync(path.join(outdir, 'qwen3_cases.json'),
    JSON.stringify({tokenizers_version: version, generator, cases, decode_cases}, null, 1) + '\n');
  const variants = [];
  for (const v of texts.variants) {
    try {
      const vt = Tokenizer.fromString(JSON.stringify(applyPatch(JSON.parse(raw), v.patch)));
      variants.push({name: v.name, patch: v.patch, cases: await encodeAll(vt, v.texts)});
      console.log('variant', v.name, 'ok');
    } catch (e) { console.log('variant', v.name, 'failed', e.message); }
  }
  fs.writeFileSync(path.join(outdir, 'variants_cases.json'),
    JSON.stringify({tokenizers_version: version, generator, variants}, null, 1) + '\n');
  console.log('cases', cases.length, 'decode', decode_cases.length);
})();
