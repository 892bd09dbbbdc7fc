// Operating `sluice serve` (issue 12): exclusive bind, the API key from the
// environment or a file, one log line per request, Prometheus /metrics, /health
// while loading, lenient/strict vendor fields, /v1/models, the Responses API.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { BIN, MODEL, MODEL_ID, startServer, post, waitFor, withTimeout, openaiError } from './helpers.mjs';

const chatBody = (extra = {}) => ({ model: MODEL_ID, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...extra });
const requestLines = (text) => text.split('\n').filter((l) => /^\S+Z sluice serve: (GET|POST|PUT|DELETE|PATCH) /.test(l));

test('a second server on a port in use fails with a clear error', async () => {
  const a = await startServer();
  try {
    const b = spawn(BIN, ['serve', '--model', MODEL, '--host', '127.0.0.1', '--port', String(a.port)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '', err = '';
    b.stdout.on('data', (d) => (out += d));
    b.stderr.on('data', (d) => (err += d));
    const code = await withTimeout(new Promise((r) => b.on('exit', (c) => r(c))), 30000, 'the second server to exit');
    assert.notEqual(code, 0);
    assert.match(err, /^sluice: 127\.0\.0\.1:\d+: cannot listen: the port is in use/m);
    assert.doesNotMatch(out, /listening/);
    // The first one still answers everything.
    for (let i = 0; i < 8; i++) assert.equal((await fetch(a.url + '/v1/models')).status, 200);
  } finally {
    assert.equal((await a.stop()).code, 0);
  }
});

async function checkKey(srv, key) {
  const get = (path, auth) => fetch(srv.url + path, { headers: auth ? { authorization: auth } : {} });
  assert.equal((await get('/health')).status, 200);
  for (const path of ['/v1/models', `/v1/models/${MODEL_ID}`, '/metrics']) {
    assert.equal((await get(path)).status, 401, path);
    assert.equal((await get(path, 'Bearer wrong')).status, 401, path);
    assert.equal((await get(path, `Bearer ${key}`)).status, 200, path);
    assert.equal((await get(path, `bearer ${key}`)).status, 200, path);
  }
  for (const path of ['/v1/chat/completions', '/v1/completions', '/v1/responses']) {
    const r = await post(srv, path, { model: MODEL_ID });
    assert.equal(r.status, 401, path);
    assert.equal(openaiError(r.body).code, 'missing_api_key');
  }
  const r = await post(srv, '/v1/chat/completions', chatBody(), { authorization: `Bearer ${key}` });
  assert.equal(r.status, 200);
}

test('SLUICE_API_KEY and --api-key-file: every route but /health needs the key', async () => {
  process.env.SLUICE_API_KEY = 'sk-from-env';
  let srv;
  try {
    srv = await startServer();
  } finally {
    delete process.env.SLUICE_API_KEY;
  }
  try {
    await checkKey(srv, 'sk-from-env');
  } finally {
    await srv.stop();
  }
  const dir = mkdtempSync(join(tmpdir(), 'sluice-key-'));
  writeFileSync(join(dir, 'key'), 'sk-from-file\n');
  const srv2 = await startServer(['--api-key-file', join(dir, 'key')]);
  try {
    await checkKey(srv2, 'sk-from-file');
  } finally {
    await srv2.stop();
  }
});

test('/metrics is Prometheus text whose counters move with a request; one log line per request', async () => {
  const srv = await startServer(['--queue', '0']);
  try {
    const scrape = async () => {
      const r = await fetch(srv.url + '/metrics');
      assert.equal(r.status, 200);
      assert.match(r.headers.get('content-type'), /^text\/plain/);
      const text = await r.text();
      const values = {};
      for (const line of text.split('\n')) {
        if (line === '') continue;
        if (line.startsWith('#')) {
          assert.match(line, /^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* \S/);
          continue;
        }
        const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})?) (\S+)$/);
        assert.ok(m, `not a sample line: ${line}`);
        values[m[1]] = Number(m[3]);
      }
      return { text, values };
    };
    const before = await scrape();
    for (const name of ['sluice_requests_total', 'sluice_completion_tokens_total', 'sluice_time_to_first_token_seconds',
                        'sluice_decode_step_seconds', 'sluice_bytes_read_total', 'sluice_expert_cache_hits_total',
                        'sluice_queue_depth', 'sluice_rows_per_pass'])
      assert.match(before.text, new RegExp(`^# TYPE ${name} `, 'm'), name);
    const r = await post(srv, '/v1/chat/completions', chatBody({ max_tokens: 3, reasoning_effort: 'none' }));
    assert.equal(r.status, 200);
    const after = await scrape();
    const v = (s, k) => s.values[k] ?? 0;
    assert.equal(v(after, 'sluice_completion_tokens_total') - v(before, 'sluice_completion_tokens_total'),
                 r.body.usage.completion_tokens);
    assert.ok(v(after, 'sluice_prompt_tokens_total') > v(before, 'sluice_prompt_tokens_total'));
    assert.equal(v(after, 'sluice_requests_total{route="/v1/chat/completions",status="200"}'), 1);
    assert.equal(v(after, 'sluice_time_to_first_token_seconds_count'), 1);
    assert.ok(v(after, 'sluice_bytes_read_total{class="expert"}') > 0);

    // A 429 and a cancellation are logged too: the model is busy with a stream, a second
    // request is turned away (--queue 0), then the stream's client leaves.
    const abort = new AbortController();
    const res = await fetch(srv.url + '/v1/completions', {
      method: 'POST', headers: { 'content-type': 'application/json' }, signal: abort.signal,
      body: JSON.stringify({ model: MODEL_ID, prompt: [448, 259, 309], max_tokens: 4000, ignore_eos: true, stream: true }),
    });
    const reader = res.body.getReader();
    await reader.read();
    const busy = await post(srv, '/v1/chat/completions', chatBody());
    assert.equal(busy.status, 429);
    abort.abort();
    // Five requests so far (two scrapes, the chat, the stream, the 429): five lines, no more.
    await waitFor(() => requestLines(srv.stderr()).length >= 5, 10000, 'five log lines');
    await new Promise((r) => setTimeout(r, 300));
    const lines = requestLines(srv.stderr());
    assert.equal(lines.length, 5, lines.join('\n'));
    assert.equal(lines.filter((l) => / 429 busy/.test(l)).length, 1, lines.join('\n'));
    assert.equal(lines.filter((l) => /POST \/v1\/completions 200 cancelled .*stream=1/.test(l)).length, 1, lines.join('\n'));
    const line = requestLines(srv.stderr()).find((l) => /POST \/v1\/chat\/completions 200 ok/.test(l));
    for (const key of ['prompt=', 'cached=', 'completion=', 'queue_s=', 'ttft_s=', 'bytes_read=', 'hit_rate=', 'total_s='])
      assert.ok(line.includes(key), `${key} in ${line}`);
  } finally {
    await srv.stop();
  }
});

test('--log-format json writes one JSON object per request', async () => {
  const srv = await startServer(['--log-format', 'json']);
  try {
    await fetch(srv.url + '/health');
    await post(srv, '/v1/chat/completions', chatBody());
    await post(srv, '/v1/chat/completions', { model: 'nope', messages: [] });
    // Every line is a JSON object; the server's own messages are event "message".
    const requests = () => srv.stderr().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l))
      .filter((o) => o.event === 'request');
    await waitFor(() => requests().length >= 3, 5000, 'three request lines');
    const objs = requests();
    // A request's line is written once the server is done with it, so the chat's (its
    // generation thread's) may land after the 404 the client sent next (seen under ASan).
    assert.deepEqual(objs.map((o) => `${o.event} ${o.path} ${o.status}`).sort(), [
      'request /health 200', 'request /v1/chat/completions 200', 'request /v1/chat/completions 404']);
    const chat = objs.find((o) => o.path === '/v1/chat/completions' && o.status === 200);
    assert.equal(typeof chat.completion_tokens, 'number');
  } finally {
    await srv.stop();
  }
});

test('/health answers 503 loading while the model opens, then version, device and the memory plan', async () => {
  const proc = spawn(BIN, ['serve', '--model', MODEL, '--host', '127.0.0.1', '--port', '0', '--test-load-delay-ms', '3000'],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  proc.stderr.on('data', (d) => (err += d));
  const exited = new Promise((r) => proc.on('exit', (c) => r(c)));
  try {
    const port = await waitFor(() => err.match(/http:\/\/127\.0\.0\.1:(\d+)\/ is up/)?.[1], 20000, 'the port');
    const url = `http://127.0.0.1:${port}`;
    const loading = await fetch(url + '/health');
    assert.equal(loading.status, 503);
    const lj = await loading.json();
    assert.equal(lj.status, 'loading');
    assert.equal(typeof lj.progress.phase, 'string');
    const gen = await post({ url }, '/v1/chat/completions', chatBody());
    assert.equal(gen.status, 503);
    assert.equal(openaiError(gen.body).code, 'model_loading');
    const ready = await waitFor(async () => {
      const r = await fetch(url + '/health');
      return r.status === 200 ? r.json() : null;
    }, 30000, 'the model to load');
    assert.equal(ready.status, 'ok');
    assert.match(ready.version, /^\d+\.\d+/);
    assert.equal(ready.device, 'cpu');
    assert.ok(ready.uptime_seconds >= 0);
    assert.ok(ready.memory_plan.budget > 0);
    assert.equal((await post({ url }, '/v1/chat/completions', chatBody())).status, 200);
  } finally {
    proc.kill('SIGTERM');
    assert.equal(await withTimeout(exited, 30000, 'exit'), 0);
  }
});

test('vendor fields: ignored with a warning by default, refused with --strict; reasoning_effort minimal', async () => {
  const vendor = { min_p: 0.05, repetition_penalty: 1.1, typical_p: 0.9 };
  const srv = await startServer();
  try {
    const r = await post(srv, '/v1/chat/completions', chatBody(vendor));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    await waitFor(() => /warning=ignored:min_p/.test(srv.stderr()), 5000, 'the warning');
    assert.equal((await post(srv, '/v1/chat/completions', chatBody({ reasoning_effort: 'minimal' }))).status, 200);
    assert.equal((await post(srv, '/v1/chat/completions', chatBody({ frobnicate: 1 }))).status, 400);
  } finally {
    await srv.stop();
  }
  const strict = await startServer(['--strict']);
  try {
    for (const [k, v] of Object.entries(vendor)) {
      const r = await post(strict, '/v1/chat/completions', chatBody({ [k]: v }));
      assert.equal(r.status, 400, k);
      assert.equal(openaiError(r.body).param, k);
    }
    const m = await post(strict, '/v1/chat/completions', chatBody({ reasoning_effort: 'minimal' }));
    assert.equal(m.status, 400);
    const noModel = await post(strict, '/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }], max_tokens: 1 });
    assert.equal(noModel.status, 400);
    assert.equal(openaiError(noModel.body).param, 'model');
    // The thinking switch is honoured, so --strict takes it too.
    const t = await post(strict, '/v1/chat/completions', chatBody({ chat_template_kwargs: { enable_thinking: false } }));
    assert.equal(t.status, 200, JSON.stringify(t.body));
  } finally {
    await strict.stop();
  }
});

test('/v1/models has the context length; SLUICE_* variables set server flags', async () => {
  process.env.SLUICE_SERVED_MODEL_NAME = 'renamed';
  let srv;
  try {
    srv = await startServer();
  } finally {
    delete process.env.SLUICE_SERVED_MODEL_NAME;
  }
  try {
    const list = await (await fetch(srv.url + '/v1/models')).json();
    assert.equal(list.data[0].id, 'renamed');
    assert.ok(Number.isInteger(list.data[0].context_length) && list.data[0].context_length > 0);
  } finally {
    await srv.stop();
  }
});

test('/v1/responses with the openai client: text in, text out, streaming', async () => {
  const srv = await startServer();
  try {
    const client = new OpenAI({ baseURL: srv.baseURL, apiKey: 'unused', maxRetries: 0 });
    const r = await client.responses.create({
      model: MODEL_ID, input: 'Hello', instructions: 'Be brief.', max_output_tokens: 6, reasoning: { effort: 'none' },
      temperature: 0,
    });
    assert.equal(r.object, 'response');
    assert.match(r.id, /^resp_/);
    assert.ok(['completed', 'incomplete'].includes(r.status));
    assert.equal(r.output[0].type, 'message');
    assert.equal(typeof r.output_text, 'string');
    assert.ok(r.output_text.length > 0);
    assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0);

    const stream = await client.responses.create({
      model: MODEL_ID, input: [{ role: 'user', content: [{ type: 'input_text', text: 'Hello' }] }],
      instructions: 'Be brief.', max_output_tokens: 6, reasoning: { effort: 'none' }, temperature: 0, stream: true,
    });
    const types = [];
    let text = '';
    let final;
    for await (const ev of stream) {
      types.push(ev.type);
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.completed' || ev.type === 'response.incomplete') final = ev.response;
    }
    assert.equal(types[0], 'response.created');
    assert.ok(types.includes('response.output_text.delta'));
    assert.equal(text, r.output_text); // greedy: the same text
    assert.equal(final.output[0].content[0].text, text);
  } finally {
    await srv.stop();
  }
});
