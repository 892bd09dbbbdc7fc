// Robustness of `sluice serve` against bad input and hard clients: malformed
// JSON, wrong types, oversize bodies, huge max_tokens, 20 concurrent clients
// against a short queue, a client killed mid-stream.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import OpenAI from 'openai';
import { startServer, post, health, openaiError, waitFor, withTimeout, MODEL_ID } from './helpers.mjs';

let srv;
const QUEUE = 2;
const LIMIT = 65536;

before(async () => {
  srv = await startServer(['--queue', String(QUEUE), '--max-tokens', '100000', '--max-request-bytes', String(LIMIT)]);
});

after(async () => {
  const { code } = await srv.stop();
  assert.equal(code, 0, `server exit status; stderr:\n${srv.stderr()}`);
});

const chatBody = (extra = {}) => ({ model: MODEL_ID, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...extra });

// A long generation to occupy the model: streamed, never stopping on its own.
const blockerBody = { model: MODEL_ID, prompt: [448, 259, 309], max_tokens: 100000, ignore_eos: true, stream: true };

test('malformed JSON and non-object bodies get 400 invalid_json / invalid_type', async () => {
  for (const body of ['{"model": "model", "messages": [', 'not json at all', '', '{"a":1}}', '{"x": "\u0000"']) {
    const r = await post(srv, '/v1/chat/completions', body);
    assert.equal(r.status, 400, body);
    assert.equal(openaiError(r.body).code, 'invalid_json', body);
  }
  for (const body of ['[1,2,3]', '"a string"', '42', 'null']) {
    const r = await post(srv, '/v1/completions', body);
    assert.equal(r.status, 400, body);
    openaiError(r.body);
  }
  const deep = '['.repeat(30000) + ']'.repeat(30000); // under the size limit
  const r = await post(srv, '/v1/chat/completions', deep);
  assert.equal(r.status, 400);
  openaiError(r.body);
});

test('wrong types are refused naming the parameter', async () => {
  const cases = [
    [{ messages: 'hello' }, 'messages'],
    [{ messages: [{ role: 'user', content: 5 }] }, 'messages[0].content'],
    [{ messages: [{ role: 'user' }] }, 'messages[0].content'],
    [{ messages: [{ content: 'x' }] }, 'messages[0].role'],
    [{ messages: [{ role: 7, content: 'x' }] }, 'messages[0].role'],
    [{ messages: ['x'] }, 'messages[0]'],
    [{ max_tokens: 'ten' }, 'max_tokens'],
    [{ max_tokens: 2.5 }, 'max_tokens'],
    [{ max_tokens: -3 }, 'max_tokens'],
    [{ max_tokens: 0 }, 'max_tokens'],
    [{ top_p: [1] }, 'top_p'],
    [{ top_k: -1 }, 'top_k'],
    [{ seed: 'x' }, 'seed'],
    [{ stop: 5 }, 'stop'],
    [{ stop: [''] }, 'stop'],
    [{ stream: 'yes' }, 'stream'],
    [{ logprobs: 1 }, 'logprobs'],
    [{ model: 5 }, 'model'],
    [{ n: 'one' }, 'n'],
    [{ tools: [{ type: 'function' }] }, 'tools[0].function'],
    [{ tool_choice: { type: 'function', function: { name: 'f' } } }, 'tool_choice'],
  ];
  for (const [extra, param] of cases) {
    const r = await post(srv, '/v1/chat/completions', chatBody(extra));
    assert.equal(r.status, 400, JSON.stringify(extra));
    assert.equal(openaiError(r.body).param, param, JSON.stringify(extra));
  }
  // No model: the one served (a client that never names it works); --strict refuses it (ops.test.mjs).
  const noModel = await post(srv, '/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }], max_tokens: 1 });
  assert.equal(noModel.status, 200, JSON.stringify(noModel.body));
  assert.equal(noModel.body.model, MODEL_ID);
  const c = await post(srv, '/v1/completions', { model: MODEL_ID, prompt: [1, -2] });
  assert.equal(c.status, 400);
  assert.equal(openaiError(c.body).param, 'prompt[1]');
  const empty = await post(srv, '/v1/completions', { model: MODEL_ID, prompt: '' });
  assert.equal(empty.status, 400);
});

test('oversize bodies get 413 and the server keeps serving', async () => {
  const big = chatBody({ messages: [{ role: 'user', content: 'x'.repeat(LIMIT + 1000) }] });
  const r = await post(srv, '/v1/chat/completions', big);
  assert.equal(r.status, 413);
  assert.equal(openaiError(r.body).code, 'request_too_large');
  const ok = await post(srv, '/v1/chat/completions', chatBody());
  assert.equal(ok.status, 200);
});

test('huge max_tokens is refused, not clamped', async () => {
  for (const n of [100001, 1e9, 2 ** 53]) {
    const r = await post(srv, '/v1/completions', { model: MODEL_ID, prompt: 'a', max_tokens: n });
    assert.equal(r.status, 400, String(n));
    const e = openaiError(r.body);
    assert.equal(e.param, 'max_tokens');
    assert.match(e.message, /too large|out of range/);
  }
  const both = await post(srv, '/v1/chat/completions', chatBody({ max_tokens: 3, max_completion_tokens: 4 }));
  assert.equal(both.status, 400);
  const mct = await post(srv, '/v1/chat/completions', chatBody({ max_tokens: undefined, max_completion_tokens: 3, ignore_eos: true }));
  assert.equal(mct.status, 200);
  assert.equal(mct.body.usage.completion_tokens, 3);
});

test('unknown routes get OpenAI-shaped 404s, routes asked with another method 405s', async () => {
  const r = await fetch(srv.url + '/v1/embeddings', { method: 'POST', body: '{}' });
  assert.equal(r.status, 404);
  openaiError(await r.json());
  const g = await fetch(srv.url + '/v1/chat/completions');
  assert.equal(g.status, 405);
  assert.equal(g.headers.get('allow'), 'POST');
  assert.equal(openaiError(await g.json()).code, 'method_not_allowed');
});

test('20 concurrent clients: the queue holds --queue, the rest get 429 with Retry-After, all answered', async () => {
  const before = await health(srv);
  const abort = new AbortController();
  const blocker = await fetch(srv.url + '/v1/completions', {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(blockerBody), signal: abort.signal,
  });
  assert.equal(blocker.status, 200);
  const reader = blocker.body.getReader();
  await withTimeout(reader.read(), 30000, 'first chunk of the blocker'); // it is generating now

  const client = new OpenAI({ baseURL: srv.baseURL, apiKey: 'none', maxRetries: 0, timeout: 120000 });
  let rejected = 0;
  const results = Array.from({ length: 20 }, (_, i) =>
    client.completions
      .create({ model: MODEL_ID, prompt: [448, 259 + i], max_tokens: 3, temperature: 0 })
      .then((r) => ({ ok: true, r }))
      .catch((e) => {
        if (e.status === 429) rejected++;
        return { ok: false, e };
      }),
  );
  // Everyone beyond the queue is answered at once, while the blocker still runs.
  await waitFor(() => rejected === 20 - QUEUE, 30000, `${20 - QUEUE} rejections (have ${rejected})`);
  const mid = await health(srv);
  assert.equal(mid.generating, true);
  assert.equal(mid.waiting, QUEUE);

  abort.abort(); // the blocker's client leaves: its generation is cancelled, the queue moves
  const all = await withTimeout(Promise.all(results), 60000, 'all 20 answers');
  const ok = all.filter((x) => x.ok);
  const busy = all.filter((x) => !x.ok);
  assert.equal(ok.length, QUEUE);
  assert.equal(busy.length, 20 - QUEUE);
  for (const { e } of busy) {
    assert.equal(e.status, 429);
    assert.equal(e.type, 'rate_limit_error');
    const ra = typeof e.headers?.get === 'function' ? e.headers.get('retry-after') : e.headers?.['retry-after'];
    assert.match(String(ra), /^[1-9][0-9]*$/);
  }
  for (const { r } of ok) assert.equal(r.choices.length, 1);
  const after = await waitFor(async () => {
    const h = await health(srv);
    return !h.generating && h.waiting === 0 && h;
  }, 30000, 'an idle server');
  assert.equal(after.requests.rejected_busy - before.requests.rejected_busy, 20 - QUEUE);
  assert.ok(after.requests.cancelled > before.requests.cancelled);
});

test('a client killed mid-stream frees the model; the server keeps serving', async () => {
  const before = await health(srv);
  const script = `
    const res = await fetch(${JSON.stringify(srv.url + '/v1/completions')}, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: ${JSON.stringify(JSON.stringify(blockerBody))} });
    const reader = res.body.getReader();
    await reader.read();
    console.log('streaming');
    setInterval(() => {}, 1000);`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const childExit = new Promise((r) => child.on('exit', r));
  await withTimeout(
    new Promise((resolve) => child.stdout.on('data', (d) => String(d).includes('streaming') && resolve())),
    30000,
    'the child client to start streaming',
  );
  assert.equal((await health(srv)).generating, true);
  child.kill('SIGKILL');
  await withTimeout(childExit, 10000, 'the child to die');
  const h = await waitFor(async () => {
    const x = await health(srv);
    return !x.generating && x.requests.cancelled > before.requests.cancelled && x;
  }, 20000, 'the cancelled generation to end');
  // Cancelled long before its 100000 tokens.
  assert.ok(h.tokens.completion - before.tokens.completion < 50000);
  const r = await post(srv, '/v1/chat/completions', chatBody());
  assert.equal(r.status, 200);
});
