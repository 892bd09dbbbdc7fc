// `sluice serve` driven by the official openai npm client: models, chat and
// completions (streaming and not), seeded sampling, stop sequences, logprobs,
// refusals, greedy parity with `sluice run --ids`, prefix-state reuse, API keys.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, runIds, health, MODEL_ID, withTimeout } from './helpers.mjs';

let srv, client;
const PROMPT = [448, 259, 309, 412, 370];

before(async () => {
  srv = await startServer(['--queue', '4', '--max-tokens', '512']);
  client = new OpenAI({ baseURL: srv.baseURL, apiKey: 'none', maxRetries: 0, timeout: 120000 });
});

after(async () => {
  const { code } = await srv.stop();
  assert.equal(code, 0, `server exit status; stderr:\n${srv.stderr()}`);
});

async function collect(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

function chatText(chunks) {
  let reasoning = '', content = '';
  for (const c of chunks)
    for (const ch of c.choices) {
      reasoning += ch.delta.reasoning_content ?? '';
      content += ch.delta.content ?? '';
    }
  return { reasoning, content };
}

// Two consecutive streamed pieces of plain text: a stop sequence made of the end
// of one and the start of the next crosses a token boundary.
function boundaryStop(pieces) {
  for (let i = 0; i + 1 < pieces.length; i++) {
    const a = pieces[i], b = pieces[i + 1];
    if (a.length >= 2 && b.length >= 2 && !/[\uFFFD\uD800-\uDFFF]/.test(a + b)) return a.slice(-2) + b.slice(0, 2);
  }
  throw new Error(`no two plain consecutive pieces in ${JSON.stringify(pieces)}`);
}

test('models list and retrieve', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids, [MODEL_ID]);
  const m = await client.models.retrieve(MODEL_ID);
  assert.equal(m.id, MODEL_ID);
  assert.equal(m.object, 'model');
  await assert.rejects(client.models.retrieve('gpt-4o'), (e) => e.status === 404);
});

test('chat completion, non-streaming: fields as OpenAI sends them', async () => {
  const r = await client.chat.completions.create({
    model: MODEL_ID,
    messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello there' }],
    max_tokens: 8,
    temperature: 0,
  });
  assert.match(r.id, /^chatcmpl-[0-9a-f]+$/);
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, MODEL_ID);
  assert.equal(typeof r.created, 'number');
  assert.ok(Math.abs(r.created - Date.now() / 1000) < 600);
  assert.equal(typeof r.system_fingerprint, 'string');
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.index, 0);
  assert.equal(c.message.role, 'assistant');
  assert.ok(['stop', 'length'].includes(c.finish_reason));
  // Thinking is on by default: the reply has a reasoning channel.
  assert.equal(typeof c.message.reasoning_content, 'string');
  assert.ok(c.message.reasoning_content.length + c.message.content.length > 0);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 8);
  assert.ok(r.usage.prompt_tokens > 10);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
  assert.ok(r.usage.completion_tokens_details.reasoning_tokens <= r.usage.completion_tokens);
});

test('chat completion, streaming equals non-streaming, with usage', async () => {
  const req = {
    model: MODEL_ID,
    messages: [{ role: 'user', content: 'Tell me a story' }],
    max_tokens: 24,
    temperature: 0,
    reasoning_effort: 'low',
  };
  const whole = await client.chat.completions.create(req);
  const chunks = await collect(
    await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } }),
  );
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  for (const c of chunks) {
    assert.equal(c.object, 'chat.completion.chunk');
    assert.equal(c.id, chunks[0].id);
    assert.equal(c.model, MODEL_ID);
  }
  const last = chunks[chunks.length - 1];
  assert.deepEqual(last.choices, []);
  const { prompt_tokens_details: cached, ...usage } = last.usage;
  const { prompt_tokens_details: _, ...wholeUsage } = whole.usage;
  assert.deepEqual(usage, wholeUsage);
  // The same prompt again: its saved state is reused whole.
  assert.equal(cached.cached_tokens, whole.usage.prompt_tokens);
  const fin = chunks[chunks.length - 2].choices[0];
  assert.equal(fin.finish_reason, whole.choices[0].finish_reason);
  for (const c of chunks.slice(0, -1)) assert.equal(c.usage, null);
  const { reasoning, content } = chatText(chunks);
  assert.equal(reasoning, whole.choices[0].message.reasoning_content);
  assert.equal(content, whole.choices[0].message.content);

  // Without include_usage, no usage chunk.
  const plain = await collect(await client.chat.completions.create({ ...req, stream: true }));
  assert.ok(plain.every((c) => c.choices.length === 1 && c.usage === undefined));
});

test('tools, tool_choice, tool results and response_format reach the prompt', async () => {
  const base = { model: MODEL_ID, max_tokens: 1, temperature: 0, messages: [{ role: 'user', content: 'Weather in Paris?' }] };
  const tools = [{
    type: 'function',
    function: { name: 'get_weather', description: 'Current weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
  }];
  const plain = await client.chat.completions.create(base);
  const withTools = await client.chat.completions.create({ ...base, tools });
  const required = await client.chat.completions.create({ ...base, tools, tool_choice: 'required' });
  const json = await client.chat.completions.create({ ...base, response_format: { type: 'json_object' } });
  assert.ok(withTools.usage.prompt_tokens > plain.usage.prompt_tokens);
  assert.ok(required.usage.prompt_tokens > withTools.usage.prompt_tokens);
  assert.ok(json.usage.prompt_tokens > plain.usage.prompt_tokens);
  const history = await client.chat.completions.create({
    ...base, tools,
    messages: [
      ...base.messages,
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temp_c": 21}' },
    ],
  });
  assert.ok(history.usage.prompt_tokens > withTools.usage.prompt_tokens);
});

test('completions: text and token-id prompts, streaming and not', async () => {
  const a = await client.completions.create({ model: MODEL_ID, prompt: 'Once upon a time', max_tokens: 10, temperature: 0 });
  assert.match(a.id, /^cmpl-/);
  assert.equal(a.object, 'text_completion');
  assert.equal(a.choices[0].index, 0);
  assert.equal(typeof a.choices[0].text, 'string');
  assert.ok(a.usage.prompt_tokens > 0);
  const stream = await client.completions.create({
    model: MODEL_ID, prompt: 'Once upon a time', max_tokens: 10, temperature: 0, stream: true,
  });
  const chunks = await collect(stream);
  assert.equal(chunks.map((c) => c.choices[0]?.text ?? '').join(''), a.choices[0].text);
  assert.equal(chunks[chunks.length - 1].choices[0].finish_reason, a.choices[0].finish_reason);

  const ids = await client.completions.create({ model: MODEL_ID, prompt: PROMPT, max_tokens: 4, temperature: 0 });
  assert.equal(ids.usage.prompt_tokens, PROMPT.length);
  const nested = await client.completions.create({ model: MODEL_ID, prompt: [PROMPT], max_tokens: 4, temperature: 0 });
  assert.equal(nested.choices[0].text, ids.choices[0].text);
});

test('default completions length is 16 tokens (OpenAI default)', async () => {
  const r = await client.completions.create({ model: MODEL_ID, prompt: PROMPT, temperature: 0, ignore_eos: true });
  assert.equal(r.usage.completion_tokens, 16);
  assert.equal(r.choices[0].finish_reason, 'length');
});

test('greedy output through the server equals sluice run --ids', async () => {
  const r = await client.completions.create({
    model: MODEL_ID, prompt: PROMPT, max_tokens: 16, temperature: 0, ignore_eos: true, return_token_ids: true,
  });
  assert.deepEqual(r.choices[0].token_ids, await runIds(PROMPT, 16));
  assert.deepEqual(r.choices[0].prompt_token_ids, PROMPT);

  // The chat path too: its rendered prompt, continued greedily by `sluice run`.
  const c = await client.chat.completions.create({
    model: MODEL_ID, messages: [{ role: 'user', content: 'Hi!' }], max_tokens: 8, temperature: 0,
    ignore_eos: true, return_token_ids: true,
  });
  assert.deepEqual(c.choices[0].token_ids, await runIds(c.choices[0].prompt_token_ids, 8));
});

test('seeded sampling is reproducible, streaming or not', async () => {
  const req = { model: MODEL_ID, prompt: PROMPT, max_tokens: 24, temperature: 1.0, top_p: 0.95, seed: 42, ignore_eos: true };
  const a = await client.completions.create(req);
  const b = await client.completions.create(req);
  assert.equal(a.choices[0].text, b.choices[0].text);
  const s = await collect(await client.completions.create({ ...req, stream: true }));
  assert.equal(s.map((c) => c.choices[0]?.text ?? '').join(''), a.choices[0].text);
  const other = await client.completions.create({ ...req, seed: 43 });
  assert.notEqual(other.choices[0].text, a.choices[0].text);
  const greedy = await client.completions.create({ ...req, temperature: 0, seed: 1 });
  const greedy2 = await client.completions.create({ ...req, temperature: 0, seed: 2 });
  assert.equal(greedy.choices[0].text, greedy2.choices[0].text); // no draws at temperature 0
  const topk = await client.completions.create({ ...req, top_k: 1 });
  assert.equal(topk.choices[0].text, greedy.choices[0].text);
});

test('stop sequences: matched across tokens, never leaked, streaming or not', async () => {
  const base = { model: MODEL_ID, prompt: PROMPT, max_tokens: 48, temperature: 0, ignore_eos: true };
  const pieces = (await collect(await client.completions.create({ ...base, stream: true })))
    .map((c) => c.choices[0]?.text ?? '')
    .filter((t) => t.length > 0);
  const full = pieces.join('');
  const stop = boundaryStop(pieces);
  const expected = full.slice(0, full.indexOf(stop));

  const r = await client.completions.create({ ...base, stop: [stop, 'never-appears'] });
  assert.equal(r.choices[0].text, expected);
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(r.usage.completion_tokens < 48);

  const chunks = await collect(await client.completions.create({ ...base, stop, stream: true }));
  const streamed = chunks.map((c) => c.choices[0]?.text ?? '');
  assert.equal(streamed.join(''), expected); // so the stop text never reached the client
  assert.equal(chunks[chunks.length - 1].choices[0].finish_reason, 'stop');

  // Chat: stop sequences apply to the content channel.
  const chatReq = {
    model: MODEL_ID, messages: [{ role: 'user', content: 'Count with me' }], max_tokens: 48, temperature: 0,
    reasoning_effort: 'none', ignore_eos: true,
  };
  const chatChunks = await collect(await client.chat.completions.create({ ...chatReq, stream: true }));
  const contentPieces = chatChunks.map((c) => c.choices[0]?.delta?.content ?? '').filter((t) => t.length > 0);
  const content = contentPieces.join('');
  const cstop = boundaryStop(contentPieces);
  const c = await client.chat.completions.create({ ...chatReq, stop: cstop });
  assert.equal(c.choices[0].message.content, content.slice(0, content.indexOf(cstop)));
  assert.equal(c.choices[0].finish_reason, 'stop');
});

test('logprobs: chat and completions', async () => {
  const r = await client.chat.completions.create({
    model: MODEL_ID, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 6, temperature: 0,
    logprobs: true, top_logprobs: 3, ignore_eos: true,
  });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, 6);
  for (const t of lp) {
    assert.equal(typeof t.token, 'string');
    assert.ok(Array.isArray(t.bytes) && t.bytes.length > 0);
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    for (let i = 1; i < 3; i++) assert.ok(t.top_logprobs[i - 1].logprob >= t.top_logprobs[i].logprob);
    assert.equal(t.top_logprobs[0].logprob, t.logprob); // greedy takes the most probable
  }
  const s = await collect(
    await client.chat.completions.create({
      model: MODEL_ID, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 6, temperature: 0,
      logprobs: true, top_logprobs: 3, ignore_eos: true, stream: true,
    }),
  );
  const streamed = s.flatMap((c) => c.choices[0]?.logprobs?.content ?? []);
  assert.deepEqual(streamed.map((t) => t.logprob), lp.map((t) => t.logprob));

  const none = await client.chat.completions.create({ model: MODEL_ID, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 2 });
  assert.equal(none.choices[0].logprobs, null);

  const c = await client.completions.create({ model: MODEL_ID, prompt: PROMPT, max_tokens: 5, temperature: 0, logprobs: 2, ignore_eos: true });
  const l = c.choices[0].logprobs;
  assert.equal(l.tokens.length, 5);
  assert.equal(l.token_logprobs.length, 5);
  assert.equal(l.top_logprobs.length, 5);
  assert.equal(l.text_offset.length, 5);
  for (const x of l.token_logprobs) assert.ok(x <= 0);
  for (const top of l.top_logprobs) assert.ok(Object.keys(top).length >= 1 && Object.keys(top).length <= 2);
});

async function refused(promise, status, param, code) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof OpenAI.APIError, String(e));
    assert.equal(e.status, status, e.message);
    if (param !== undefined) assert.equal(e.param, param, e.message);
    if (code !== undefined) assert.equal(e.code, code, e.message);
    return true;
  });
}

test('what cannot be honoured is refused with OpenAI errors', async () => {
  const msgs = [{ role: 'user', content: 'Hi' }];
  const chat = (extra) => client.chat.completions.create({ model: MODEL_ID, messages: msgs, max_tokens: 2, ...extra });
  await refused(chat({ n: 2 }), 400, 'n', 'unsupported_parameter');
  await refused(
    chat({ messages: [{ role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] }] }),
    400, 'messages[0].content[1].type', 'unsupported_content',
  );
  await refused(chat({ messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } }] }] }), 400, 'messages[0].content[0].type');
  await refused(chat({ messages: [{ role: 'wizard', content: 'hi' }] }), 400, 'messages[0].role', 'invalid_value');
  await refused(chat({ temperature: 'hot' }), 400, 'temperature', 'invalid_type');
  await refused(chat({ temperature: 3 }), 400, 'temperature', 'invalid_value');
  await refused(chat({ messages: [] }), 400, 'messages');
  await refused(chat({ model: 'gpt-4o' }), 404, 'model', 'model_not_found');
  await refused(chat({ max_tokens: 1000000000 }), 400, 'max_tokens');
  await refused(chat({ top_logprobs: 2 }), 400, 'top_logprobs');
  await refused(chat({ presence_penalty: 0.5 }), 400, 'presence_penalty', 'unsupported_parameter');
  await refused(chat({ logit_bias: { 12: 5 } }), 400, 'logit_bias');
  await refused(chat({ stream_options: { include_usage: true } }), 400, 'stream_options');
  await refused(chat({ reasoning_effort: 'extreme' }), 400, 'reasoning_effort');
  await refused(chat({ frobnicate: true }), 400, 'frobnicate', 'unknown_parameter');
  await refused(chat({ stop: ['a', 'b', 'c', 'd', 'e'] }), 400, 'stop');
  await refused(client.completions.create({ model: MODEL_ID, prompt: [1, 2, 99999], max_tokens: 2 }), 400, 'prompt[2]');
  await refused(client.completions.create({ model: MODEL_ID, prompt: 'x', echo: true }), 400, 'echo');
  await refused(client.completions.create({ model: MODEL_ID, prompt: ['a', 'b'] }), 400, 'prompt');
  // The streaming form refuses the same way, before any chunk.
  await refused(chat({ n: 3, stream: true }), 400, 'n');
  // Still serving.
  const ok = await chat({});
  assert.equal(ok.choices.length, 1);
});

test('a second chat turn that extends the first reuses its state exactly', async () => {
  // A second server without saved states gives the cold numbers for the same request.
  // Both draft nothing: drafted rows would blur the expert-span comparison.
  const warm = await startServer(['--draft', 'none']);
  const cold = await startServer(['--state-cache-mb', '0', '--draft', 'none']);
  const client = new OpenAI({ baseURL: warm.baseURL, apiKey: 'none', maxRetries: 0, timeout: 120000 });
  const srv = warm;
  try {
    const coldClient = new OpenAI({ baseURL: cold.baseURL, apiKey: 'none', maxRetries: 0, timeout: 120000 });
    const base = { model: MODEL_ID, max_tokens: 6, temperature: 0, reasoning_effort: 'none', ignore_eos: true };
    const turn1Msgs = [{ role: 'user', content: 'My name is Ada. Remember it.' }];
    const t1 = await client.chat.completions.create({ ...base, messages: turn1Msgs });
    const turn2Msgs = [...turn1Msgs, { role: 'assistant', content: t1.choices[0].message.content }, { role: 'user', content: 'What is my name?' }];

    const h0 = await health(srv);
    const t2 = await client.chat.completions.create({ ...base, messages: turn2Msgs });
    const h1 = await health(srv);
    const c0 = await health(cold);
    const c2 = await coldClient.chat.completions.create({ ...base, messages: turn2Msgs });
    const c1 = await health(cold);

    assert.equal(t2.choices[0].message.content, c2.choices[0].message.content); // reuse is exact
    assert.equal(t2.usage.prompt_tokens, c2.usage.prompt_tokens);
    assert.ok(t2.usage.prompt_tokens_details.cached_tokens >= t1.usage.prompt_tokens,
      `cached ${t2.usage.prompt_tokens_details.cached_tokens} < turn-1 prompt ${t1.usage.prompt_tokens}`);
    assert.equal(c2.usage.prompt_tokens_details.cached_tokens, 0);
    const computedWarm = h1.tokens.prompt_computed - h0.tokens.prompt_computed;
    const computedCold = c1.tokens.prompt_computed - c0.tokens.prompt_computed;
    assert.equal(computedWarm, t2.usage.prompt_tokens - t2.usage.prompt_tokens_details.cached_tokens);
    assert.equal(computedCold, c2.usage.prompt_tokens);
    // Expert spans the MoE needed (each one read from disk or taken from the expert cache).
    const spansWarm = h1.experts.fetched - h0.experts.fetched;
    const spansCold = c1.experts.fetched - c0.experts.fetched;
    assert.ok(spansWarm < spansCold, `expert spans: warm ${spansWarm} vs cold ${spansCold}`);
    assert.ok(h1.state_cache.bytes <= h1.state_cache.budget && h1.state_cache.entries >= 1);

    // An unrelated conversation shares nothing and still answers like a fresh server.
    const other = [{ role: 'user', content: 'Unrelated question' }];
    const o1 = await client.chat.completions.create({ ...base, messages: other });
    const o2 = await coldClient.chat.completions.create({ ...base, messages: other });
    assert.equal(o1.choices[0].message.content, o2.choices[0].message.content);
  } finally {
    const { code } = await cold.stop();
    assert.equal(code, 0);
    assert.equal((await warm.stop()).code, 0);
  }
});

test('--api-key: 401 without the right key, /health open', async () => {
  const locked = await startServer(['--api-key', 'sekrit']);
  try {
    const bad = new OpenAI({ baseURL: locked.baseURL, apiKey: 'wrong', maxRetries: 0 });
    await refused(bad.models.list(), 401, undefined, 'invalid_api_key');
    await refused(bad.chat.completions.create({ model: MODEL_ID, messages: [{ role: 'user', content: 'x' }], max_tokens: 1 }), 401);
    const none = await fetch(locked.baseURL + '/models');
    assert.equal(none.status, 401);
    assert.equal((await none.json()).error.code, 'missing_api_key');
    const good = new OpenAI({ baseURL: locked.baseURL, apiKey: 'sekrit', maxRetries: 0 });
    const r = await good.chat.completions.create({ model: MODEL_ID, messages: [{ role: 'user', content: 'x' }], max_tokens: 1 });
    assert.equal(r.choices.length, 1);
    assert.equal((await fetch(locked.url + '/health')).status, 200);
  } finally {
    await withTimeout(locked.stop(), 30000, 'stop');
  }
});
