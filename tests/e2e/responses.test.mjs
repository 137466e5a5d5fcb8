// End-to-end tests of the Infernix server's Responses API with the official
// openai client (client.responses). The Go test TestResponsesNodeClient
// starts the server and runs this file with INFERNIX_BASE_URL (…/v1) and
// INFERNIX_API_KEY set; INFERNIX_TOOLS=1 adds the tool and reasoning tests
// for a server whose model was trained for them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.env.INFERNIX_BASE_URL;
const apiKey = process.env.INFERNIX_API_KEY || 'none';
if (!baseURL) throw new Error('set INFERNIX_BASE_URL (e.g. http://127.0.0.1:8080/v1)');
const tools = !process.env.INFERNIX_TOOLS && 'set INFERNIX_TOOLS=1 for a server whose model can call tools';

const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
const model = 'gpt-5-codex';

test('responses.create, non-streaming, then retrieve and delete', async () => {
  // Effort none: no thinking, so that a thinking model answers within 8 tokens.
  const r = await client.responses.create({ model, input: 'Hello, who are you?', instructions: 'Be brief.',
    max_output_tokens: 8, temperature: 0, reasoning: { effort: 'none' } });
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.ok(r.output_text.length > 0, JSON.stringify(r));
  assert.ok(['completed', 'incomplete'].includes(r.status));
  assert.ok(r.usage.output_tokens > 0 && r.usage.output_tokens <= 8);
  const got = await client.responses.retrieve(r.id);
  assert.equal(got.id, r.id);
  assert.equal(got.output_text, r.output_text);
  await client.responses.delete(r.id);
  await assert.rejects(client.responses.retrieve(r.id), (err) => err instanceof OpenAI.NotFoundError);
});

test('streaming events assemble the same text', async () => {
  const params = { model, input: 'Hello, who are you?', max_output_tokens: 10, temperature: 0 };
  const whole = await client.responses.create(params);
  const stream = await client.responses.create({ ...params, stream: true });
  let text = '';
  let seq = -1;
  const types = [];
  let final = null;
  for await (const e of stream) {
    assert.equal(e.sequence_number, seq + 1);
    seq = e.sequence_number;
    types.push(e.type);
    if (e.type === 'response.output_text.delta') text += e.delta;
    if (e.type === 'response.completed' || e.type === 'response.incomplete') final = e.response;
  }
  assert.equal(types[0], 'response.created');
  assert.equal(types[1], 'response.in_progress');
  assert.equal(text, whole.output_text);
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
});

test('the stream helper gives the final response', async () => {
  const stream = client.responses.stream({ model, input: 'Hello', max_output_tokens: 6, temperature: 0, reasoning: { effort: 'none' } });
  const final = await stream.finalResponse();
  assert.ok(final.output_text.length > 0, JSON.stringify(final));
});

test('previous_response_id continues a stored response', async () => {
  const first = await client.responses.create({ model, input: 'Hello', max_output_tokens: 4, temperature: 0 });
  const next = await client.responses.create({ model, input: 'And then?', previous_response_id: first.id, max_output_tokens: 4 });
  assert.equal(next.previous_response_id, first.id);
  assert.ok(next.usage.input_tokens > first.usage.input_tokens);
  await assert.rejects(
    client.responses.create({ model, input: 'x', previous_response_id: 'resp_missing', max_output_tokens: 2 }),
    (err) => err instanceof OpenAI.NotFoundError && err.param === 'previous_response_id',
  );
});

test('a bad request raises BadRequestError naming the field', async () => {
  await assert.rejects(
    client.responses.create({ model, input: 'hi', reasoning: { effort: 'maximal' } }),
    (err) => err instanceof OpenAI.BadRequestError && err.param === 'reasoning.effort',
  );
});

const weather = [{ type: 'function', name: 'get_weather', description: 'Get the current weather for a city.', strict: false,
  parameters: { type: 'object', properties: { city: { type: 'string', description: 'The city name' },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'], description: 'Temperature unit' } }, required: ['city'] } },
{ type: 'web_search' }];

test('tools: a full round trip', { skip: tools }, async () => {
  const first = await client.responses.create({ model, input: "What's the weather in Paris?", tools: weather,
    max_output_tokens: 200, temperature: 0, reasoning: { effort: 'none' } });
  const call = first.output.find((i) => i.type === 'function_call');
  assert.ok(call, JSON.stringify(first.output));
  assert.equal(call.name, 'get_weather');
  assert.equal(JSON.parse(call.arguments).city, 'Paris');
  const second = await client.responses.create({ model, tools: weather, previous_response_id: first.id,
    max_output_tokens: 200, temperature: 0, reasoning: { effort: 'none' },
    input: [{ type: 'function_call_output', call_id: call.call_id,
      output: '{"city": "Paris", "temperature": 18, "unit": "celsius", "condition": "sunny"}' }] });
  assert.match(second.output_text, /18/);
});

test('reasoning on and off', { skip: tools }, async () => {
  const on = await client.responses.create({ model, input: 'What is 23 + 45?', max_output_tokens: 300, temperature: 0 });
  assert.equal(on.output[0].type, 'reasoning', JSON.stringify(on.output));
  assert.match(on.output_text, /68/);
  const off = await client.responses.create({ model, input: 'What is 23 + 45?', max_output_tokens: 300, temperature: 0,
    reasoning: { effort: 'none' } });
  assert.deepEqual(off.output.map((i) => i.type), ['message']);
  assert.match(off.output_text, /68/);
});
