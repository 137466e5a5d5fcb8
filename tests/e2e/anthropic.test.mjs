// End-to-end tests of the Infernix server's Anthropic Messages API with the
// official @anthropic-ai/sdk client. The Go test TestAnthropicNodeClient
// starts the server and runs this file with INFERNIX_BASE_URL (the server's
// root URL, without /v1) and INFERNIX_API_KEY set; INFERNIX_TOOLS=1 adds the
// tool and thinking tests for a server whose model was trained for them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';

const baseURL = process.env.INFERNIX_BASE_URL;
const apiKey = process.env.INFERNIX_API_KEY || 'none';
if (!baseURL) throw new Error('set INFERNIX_BASE_URL (e.g. http://127.0.0.1:8080)');
const tools = !process.env.INFERNIX_TOOLS && 'set INFERNIX_TOOLS=1 for a server whose model can call tools';

const client = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
const model = 'claude-sonnet-4-5';
const messages = [{ role: 'user', content: 'Hello, who are you?' }];

test('messages.create, non-streaming', async () => {
  const m = await client.messages.create({
    model, max_tokens: 8, temperature: 0, messages,
    system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }],
  });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.match(m.id, /^msg_/);
  assert.ok(m.content.length >= 1, JSON.stringify(m));
  assert.ok(['max_tokens', 'end_turn'].includes(m.stop_reason), m.stop_reason);
  assert.ok(m.usage.output_tokens > 0 && m.usage.output_tokens <= 8);
  assert.equal(typeof m.usage.cache_read_input_tokens, 'number');
});

test('messages.stream assembles the same message', async () => {
  const params = { model, max_tokens: 10, temperature: 0, messages };
  const whole = await client.messages.create(params);
  const events = [];
  const stream = client.messages.stream(params);
  stream.on('streamEvent', (e) => events.push(e.type));
  const final = await stream.finalMessage();
  assert.deepEqual(final.content, whole.content);
  assert.equal(final.stop_reason, whole.stop_reason);
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
  assert.equal(events[0], 'message_start');
  assert.equal(events.at(-1), 'message_stop');
  assert.ok(events.includes('content_block_delta'));
});

test('messages.create with stream: true yields raw events', async () => {
  const stream = await client.messages.create({ model, max_tokens: 5, temperature: 0, messages, stream: true });
  const types = [];
  for await (const e of stream) types.push(e.type);
  assert.equal(types[0], 'message_start');
  assert.ok(types.includes('content_block_start')); // (the SDK drops ping events)
  assert.equal(types.at(-2), 'message_delta');
  assert.equal(types.at(-1), 'message_stop');
});

test('countTokens', async () => {
  const r = await client.messages.countTokens({ model, messages, system: 'Be brief.' });
  assert.ok(r.input_tokens > 5, JSON.stringify(r));
});

test('errors come as the SDK error classes', async () => {
  await assert.rejects(
    client.messages.create({ model, max_tokens: 5, messages: [] }),
    (err) => err instanceof Anthropic.BadRequestError && err.status === 400 && err.error?.error?.type === 'invalid_request_error',
  );
  await assert.rejects(
    client.messages.create({ model, max_tokens: 5, messages, temperature: 'hot' }),
    (err) => err instanceof Anthropic.BadRequestError && /temperature/.test(err.message),
  );
});

test('a wrong API key raises AuthenticationError', { skip: apiKey === 'none' && 'the server has no API key' }, async () => {
  const bad = new Anthropic({ baseURL, apiKey: 'wrong-key', maxRetries: 0 });
  await assert.rejects(bad.messages.create({ model, max_tokens: 2, messages }),
    (err) => err instanceof Anthropic.AuthenticationError && err.status === 401);
});

const weather = [{ name: 'get_weather', description: 'Get the current weather for a city.',
  input_schema: { type: 'object', properties: { city: { type: 'string', description: 'The city name' },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'], description: 'Temperature unit' } }, required: ['city'] } }];

test('tools: a full round trip', { skip: tools }, async () => {
  const ask = { role: 'user', content: "What's the weather in Paris?" };
  const first = await client.messages.create({ model, max_tokens: 200, temperature: 0, tools: weather, messages: [ask] });
  assert.equal(first.stop_reason, 'tool_use', JSON.stringify(first));
  const use = first.content.find((b) => b.type === 'tool_use');
  assert.equal(use.name, 'get_weather');
  assert.match(use.id, /^toolu_/);
  assert.equal(use.input.city, 'Paris');
  // Streamed, the SDK assembles the same call from input_json_delta events.
  const streamed = await client.messages.stream({ model, max_tokens: 200, temperature: 0, tools: weather, messages: [ask] }).finalMessage();
  assert.deepEqual(streamed.content.find((b) => b.type === 'tool_use').input, use.input);
  const second = await client.messages.create({
    model, max_tokens: 200, temperature: 0, tools: weather,
    messages: [ask, { role: 'assistant', content: first.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id,
        content: '{"city": "Paris", "temperature": 18, "unit": "celsius", "condition": "sunny"}' }] }],
  });
  assert.equal(second.stop_reason, 'end_turn');
  assert.match(second.content[0].text, /18/);
});

test('thinking on and off', { skip: tools }, async () => {
  const q = [{ role: 'user', content: 'What is 23 + 45?' }];
  const on = await client.messages.stream({ model, max_tokens: 300, temperature: 0, messages: q,
    thinking: { type: 'enabled', budget_tokens: 200 } }).finalMessage();
  assert.equal(on.content[0].type, 'thinking', JSON.stringify(on));
  assert.ok(on.content[0].thinking.length > 0 && on.content[0].signature.length > 0);
  assert.match(on.content.at(-1).text, /68/);
  const off = await client.messages.create({ model, max_tokens: 300, temperature: 0, messages: q, thinking: { type: 'disabled' } });
  assert.deepEqual(off.content.map((b) => b.type), ['text']);
  assert.match(off.content[0].text, /68/);
});
