// End-to-end tests of the Infernix server with the official openai client.
// The Go test TestOpenAINodeClient starts the server and runs this file with
// INFERNIX_BASE_URL (…/v1) and INFERNIX_API_KEY set; it can also be run by
// hand against any running server: INFERNIX_BASE_URL=http://127.0.0.1:8080/v1
// INFERNIX_API_KEY=KEY node --test openai.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.env.INFERNIX_BASE_URL;
const apiKey = process.env.INFERNIX_API_KEY || 'none';
if (!baseURL) throw new Error('set INFERNIX_BASE_URL (e.g. http://127.0.0.1:8080/v1)');

const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
const messages = [{ role: 'user', content: 'Hello, who are you?' }];

test('models.list returns the served model', async () => {
  const page = await client.models.list();
  assert.equal(page.data.length, 1);
  assert.equal(page.data[0].object, 'model');
  assert.ok(page.data[0].id.length > 0);
});

test('chat completion, non-streaming', async () => {
  const r = await client.chat.completions.create({
    model: 'any', messages, max_tokens: 8, temperature: 0, ignore_eos: true,
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  // A thinking model may spend a short budget on reasoning_content.
  const m = r.choices[0].message;
  assert.ok((m.content ?? '').length + (m.reasoning_content ?? '').length > 0, JSON.stringify(m));
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 8);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 8);
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
});

test('chat completion, streaming equals non-streaming', async () => {
  const params = { model: 'any', messages, max_tokens: 10, temperature: 0, ignore_eos: true };
  const whole = await client.chat.completions.create(params);
  const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 10);
});

test('the stream helper assembles the final message', async () => {
  const runner = client.chat.completions.stream({
    model: 'any', messages, max_tokens: 6, temperature: 0, ignore_eos: true,
  });
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].finish_reason, 'length');
  const m = final.choices[0].message;
  assert.ok((m.content ?? '').length + (m.reasoning_content ?? '').length > 0, JSON.stringify(m));
});

test('aborting a stream mid-way works', async () => {
  const controller = new AbortController();
  const stream = await client.chat.completions.create(
    { model: 'any', messages, max_tokens: 1500, ignore_eos: true, stream: true },
    { signal: controller.signal },
  );
  let chunks = 0;
  try {
    for await (const _ of stream) {
      if (++chunks === 3) controller.abort();
    }
  } catch (err) {
    // Depending on timing the client reports the abort or just ends.
    assert.ok(err instanceof OpenAI.APIUserAbortError || err.name === 'AbortError', String(err));
  }
  assert.ok(chunks >= 3 && chunks < 100, `${chunks} chunks after abort`);
});

test('text completion', async () => {
  const r = await client.completions.create({ model: 'any', prompt: 'Once upon a time', max_tokens: 5, temperature: 0, ignore_eos: true });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.usage.completion_tokens, 5);
  assert.equal(typeof r.choices[0].text, 'string');
});

test('logprobs', async () => {
  const r = await client.chat.completions.create({
    model: 'any', messages, max_tokens: 4, temperature: 0, ignore_eos: true, logprobs: true, top_logprobs: 2,
  });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, 4);
  for (const t of lp) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 2);
  }
});

test('a bad request raises BadRequestError naming the field', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'any', messages, max_tokens: 4, temperature: -3 }),
    (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError, String(err));
      assert.equal(err.status, 400);
      assert.equal(err.param, 'temperature');
      return true;
    },
  );
  await assert.rejects(
    client.chat.completions.create({
      model: 'any', max_tokens: 4,
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] }],
    }),
    (err) => err instanceof OpenAI.BadRequestError && /no vision/.test(err.message),
  );
});

test('a wrong API key raises AuthenticationError', { skip: apiKey === 'none' && 'the server has no API key' }, async () => {
  const bad = new OpenAI({ baseURL, apiKey: 'wrong-key', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (err) => err instanceof OpenAI.AuthenticationError && err.status === 401);
});

test('tools: a forced call comes back as tool_calls', { skip: !process.env.INFERNIX_TOOLS && 'set INFERNIX_TOOLS=1 for a server whose model can call tools' }, async () => {
  // The schema the demo models were trained with (tests/testdata/models/demo/README.md).
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Get the current weather for a city.',
    parameters: { type: 'object', properties: { city: { type: 'string', description: 'The city name' },
      unit: { type: 'string', enum: ['celsius', 'fahrenheit'], description: 'Temperature unit' } }, required: ['city'] } } }];
  const r = await client.chat.completions.create({
    model: 'any', max_tokens: 200, temperature: 0, tools,
    messages: [{ role: 'user', content: 'What is the weather like in Paris?' }],
  });
  const call = r.choices[0].message.tool_calls?.[0];
  assert.ok(call, JSON.stringify(r.choices[0].message));
  assert.equal(call.function.name, 'get_weather');
  assert.equal(JSON.parse(call.function.arguments).city, 'Paris');
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
});
