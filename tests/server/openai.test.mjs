// openai.test.mjs - `1bit serve` through the official `openai` npm client:
// what an application written against OpenAI sees when pointed at us.
// Started by run.sh (ctest: server_openai_node), which passes:
//   OB_CLI_PATH      the 1bit binary
//   OB_MODELS        ../shared/models
//   OB_SKIP_MARKER   a file to create when the build cannot do text yet
//   OB_TRANSCRIPT    optional: where to write a streaming session transcript
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import OpenAI from 'openai';

const CLI = process.env.OB_CLI_PATH;
const MODELS = process.env.OB_MODELS;
const MODEL_PATH = `${MODELS}/stories260K/stories260K.gguf`;
const KEY = 'test-key-1bit';
const ref = JSON.parse(readFileSync(`${MODELS}/stories260K/stories260K.reference.json`, 'utf8'));
const onceUpon = ref.cases.find((c) => c.name === 'once_upon_a_time_64');

let server;
let client;
let canText = false;
let canChat = false;

// Start `1bit serve` on a free port and wait until it says the model is ready.
function startServer(args) {
  return new Promise((resolve, reject) => {
    const proc = spawn(CLI, ['serve', '-m', MODEL_PATH, '--port', '0', '-t', '2', '-np', '4', ...args], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, OB_LOG: 'warn' },
    });
    let port = 0;
    let log = '';
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), 30000);
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (chunk) => {
      log += chunk;
      const m = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) port = Number(m[1]);
      if (port && log.includes('model ready')) {
        clearTimeout(timer);
        resolve({ proc, port });
      }
    });
    proc.on('exit', (code) => reject(new Error(`server exited (${code}):\n${log}`)));
  });
}

before(async () => {
  server = await startServer(['--api-key', KEY, '--embeddings']);
  client = new OpenAI({ baseURL: `http://127.0.0.1:${server.port}/v1`, apiKey: KEY, maxRetries: 0, timeout: 60000 });
  // What can this build do? Text needs the tokenizer, chat the template engine.
  try {
    await client.completions.create({ model: 'stories260K', prompt: 'Once', max_tokens: 1 });
    canText = true;
  } catch (e) {
    if (e.status !== 501) throw e;
  }
  if (canText) {
    try {
      await client.chat.completions.create({ model: 'stories260K', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 });
      canChat = true;
    } catch (e) {
      if (e.status !== 501) throw e;
    }
  }
  if (!canText || !canChat) {
    writeFileSync(process.env.OB_SKIP_MARKER, `skipped: this build has no ${canText ? 'chat templates' : 'tokenizer'} yet\n`);
  }
});

after(async () => {
  if (!server) return;
  const exited = new Promise((resolve) => server.proc.on('exit', (code, signal) => resolve({ code, signal })));
  server.proc.kill('SIGTERM');
  const { code } = await exited;
  assert.equal(code, 0, 'SIGTERM shuts the server down cleanly');
});

test('models.list names the served model', async () => {
  const page = await client.models.list();
  const ids = page.data.map((m) => m.id);
  assert.deepEqual(ids, ['stories260K.gguf']);
  assert.equal(page.data[0].object, 'model');
});

test('completions: non-streaming equals the llama2.c reference', async (t) => {
  if (!canText) return t.skip('no tokenizer in this build');
  const r = await client.completions.create({
    model: 'stories260K', prompt: 'Once upon a time', max_tokens: onceUpon.expected_ids_after_prompt.length, temperature: 0,
  });
  assert.equal('Once upon a time' + r.choices[0].text, onceUpon.expected_text);
  assert.equal(r.object, 'text_completion');
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.prompt_tokens, 5);
  assert.equal(r.usage.completion_tokens, onceUpon.expected_ids_after_prompt.length);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.equal(typeof r.timings.predicted_per_second, 'number'); // llama-server's timings, for Lemonade
});

test('completions: streaming gives the same text, one chunk per token', async (t) => {
  if (!canText) return t.skip('no tokenizer in this build');
  const n = onceUpon.expected_ids_after_prompt.length;
  const stream = await client.completions.create({
    model: 'stories260K', prompt: 'Once upon a time', max_tokens: n, temperature: 0, stream: true,
  });
  let text = '';
  let chunks = 0;
  let finish = null;
  for await (const chunk of stream) {
    if (chunk.choices[0]?.text) { text += chunk.choices[0].text; chunks++; }
    if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
  }
  assert.equal('Once upon a time' + text, onceUpon.expected_text);
  assert.equal(chunks, n);
  assert.equal(finish, 'length');
});

test('chat: non-streaming', async (t) => {
  if (!canChat) return t.skip('no chat templates in this build');
  const r = await client.chat.completions.create({
    model: 'stories260K',
    messages: [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Once upon a time' }],
    max_tokens: 16, temperature: 0,
  });
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.ok(r.choices[0].message.content.length > 0);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 16);
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
});

test('chat: streaming with usage, and the same answer as non-streaming', async (t) => {
  if (!canChat) return t.skip('no chat templates in this build');
  const params = { model: 'stories260K', messages: [{ role: 'user', content: 'Tell me about Lily.' }], max_tokens: 24, temperature: 0 };
  const whole = await client.chat.completions.create(params);
  const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  const lines = [];
  let text = '';
  let role = null;
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    lines.push(JSON.stringify(chunk));
    const c = chunk.choices[0];
    if (c?.delta?.role) role = c.delta.role;
    if (c?.delta?.content) text += c.delta.content;
    if (c?.finish_reason) finish = c.finish_reason;
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(role, 'assistant');
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 24);
  assert.equal(usage.prompt_tokens, whole.usage.prompt_tokens);
  if (process.env.OB_TRANSCRIPT) {
    writeFileSync(process.env.OB_TRANSCRIPT,
      `request: ${JSON.stringify({ ...params, stream: true, stream_options: { include_usage: true } })}\n` +
      lines.map((l) => `chunk: ${l}`).join('\n') + `\ntext: ${JSON.stringify(text)}\n`);
  }
});

test('logprobs, stop strings and n through the client', async (t) => {
  if (!canText) return t.skip('no tokenizer in this build');
  const r = await client.completions.create({
    model: 'stories260K', prompt: 'Once upon a time', max_tokens: 40, temperature: 0, stop: [' girl'], logprobs: 2,
  });
  assert.equal(r.choices[0].text, ', there was a little');
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.choices[0].logprobs.tokens.join(''), r.choices[0].text);
  const many = await client.completions.create({ model: 'stories260K', prompt: 'Lily', max_tokens: 8, n: 3, seed: 5, temperature: 1 });
  assert.deepEqual(many.choices.map((c) => c.index), [0, 1, 2]);
  if (!canChat) return;
  const c = await client.chat.completions.create({
    model: 'stories260K', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 2,
  });
  assert.equal(c.choices[0].logprobs.content.length, 4);
  for (const e of c.choices[0].logprobs.content) {
    assert.ok(e.logprob <= 0);
    assert.equal(e.top_logprobs.length, 2);
    assert.equal(e.top_logprobs[0].token, e.token);
  }
});

test('errors arrive as the client\'s typed errors, and the server keeps serving', async (t) => {
  const bad = new OpenAI({ baseURL: `http://127.0.0.1:${server.port}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401 && e.code === 'invalid_api_key');
  await assert.rejects(
    client.chat.completions.create({ model: 'stories260K', messages: [{ role: 'user', content: 'x' }], temperature: 'hot' }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'temperature' && e.code === 'invalid_type');
  await assert.rejects(
    client.completions.create({ model: 'gpt-9', prompt: 'x' }),
    (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');
  await assert.rejects(
    client.completions.create({ model: 'stories260K', prompt: Array(3000).fill(300), max_tokens: 1 }),
    (e) => e instanceof OpenAI.BadRequestError && e.code === 'context_length_exceeded' && /3000 tokens, 953 more than the context of 2048/.test(e.message));
  await assert.rejects(
    client.embeddings.create({ model: 'stories260K', input: [] }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'input');
  // still serving
  const page = await client.models.list();
  assert.equal(page.data.length, 1);
  if (!canText) return t.skip('no tokenizer in this build: only the error half ran');
  const ok = await client.completions.create({ model: 'stories260K', prompt: 'Once', max_tokens: 2 });
  assert.equal(ok.choices.length, 1);
});

test('a stream aborted by the client does not disturb the server', async (t) => {
  if (!canText) return t.skip('no tokenizer in this build');
  const stream = await client.completions.create({
    model: 'stories260K', prompt: 'Once upon a time', max_tokens: 1000, ignore_eos: true, stream: true,
  });
  let n = 0;
  for await (const chunk of stream) {
    if (++n === 3) { stream.controller.abort(); break; }
    void chunk;
  }
  const r = await client.completions.create({ model: 'stories260K', prompt: 'Once upon a time', max_tokens: 5, temperature: 0 });
  assert.equal(r.choices[0].text, ', there was a little');
});

test('embeddings through the client: unit vectors, one per input, base64 decoded by the client', async (t) => {
  if (!canText) return t.skip('no tokenizer in this build');
  const r = await client.embeddings.create({ model: 'stories260K', input: ['Once upon a time', 'The cat sat.'] });
  assert.equal(r.object, 'list');
  assert.equal(r.data.length, 2);
  assert.deepEqual(r.data.map((d) => d.index), [0, 1]);
  for (const d of r.data) {
    assert.equal(d.object, 'embedding');
    const norm = Math.sqrt(d.embedding.reduce((a, x) => a + x * x, 0));
    assert.ok(Math.abs(norm - 1) < 1e-5, `norm ${norm}`);
  }
  assert.notDeepEqual(r.data[0].embedding, r.data[1].embedding);
  assert.ok(r.usage.prompt_tokens > 0 && r.usage.total_tokens === r.usage.prompt_tokens);
  // the client asks for base64 by default when no format is given and decodes it itself
  const one = await client.embeddings.create({ model: 'stories260K', input: 'Once upon a time', encoding_format: 'base64' });
  const bytes = Buffer.from(one.data[0].embedding, 'base64');
  const floats = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
  assert.deepEqual(Array.from(floats), r.data[0].embedding.map((x) => Math.fround(x)));
});

test('tools: offered to a model that answers in text, the answer stays text', async (t) => {
  if (!canChat) return t.skip('no chat templates in this build');
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  const params = { model: 'stories260K', messages: [{ role: 'user', content: 'Once upon a time' }], tools, max_tokens: 12, temperature: 0 };
  const r = await client.chat.completions.create(params);
  assert.equal(r.choices[0].message.tool_calls, undefined);
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  let text = '';
  for await (const chunk of await client.chat.completions.create({ ...params, stream: true })) {
    assert.equal(chunk.choices[0]?.delta?.tool_calls, undefined);
    text += chunk.choices[0]?.delta?.content ?? '';
  }
  assert.equal(text, r.choices[0].message.content);
});
