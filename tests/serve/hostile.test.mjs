// Hostile clients against `sluice serve` (issue 13): bodies over the limit once
// decoded (chunked, gzip; with and without the key), clients that leave during a
// long prefill, shutdown during prefill, slow-header connections, browser-style
// requests (text/plain, foreign Host), keep-alive pings during prefill.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { gzipSync } from 'node:zlib';
import OpenAI from 'openai';
import { MODEL_ID, startServer, post, waitFor, withTimeout, sleep } from './helpers.mjs';

// Peak resident memory of the server process, in bytes.
const peakRss = (srv) => Number(readFileSync(`/proc/${srv.proc.pid}/status`, 'utf8').match(/VmHWM:\s+(\d+) kB/)[1]) * 1024;

// A raw request whose body is written in pieces (chunked when no content-length is given).
// Resolves to the status, or to 'reset' when the server closed the connection first.
function rawPost(srv, path, headers, pieces) {
  return new Promise((resolve) => {
    const req = http.request(srv.url + path, { method: 'POST', headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
      res.on('error', () => resolve(res.statusCode));
    });
    req.on('error', () => resolve('reset'));
    (async () => {
      for (const p of pieces) {
        if (req.destroyed) return;
        if (!req.write(p)) await new Promise((r) => req.once('drain', r).once('close', r));
      }
      req.end();
    })().catch(() => {});
  });
}

test('bodies over the limit once decoded are refused without reading them into memory', async () => {
  const LIMIT = 1 << 20;
  const srv = await startServer(['--max-request-bytes', String(LIMIT), '--api-key', 'sk-k']);
  try {
    const auth = { authorization: 'Bearer sk-k', 'content-type': 'application/json' };
    await post(srv, '/v1/chat/completions', { model: MODEL_ID, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }, auth);
    const base = peakRss(srv);
    const MiB = Buffer.alloc(1 << 20, 0x20);
    // 64 MiB chunked (no content-length), 128 MiB of gzip in ~130 KB, and the same gzip bomb without the key.
    const chunked = await rawPost(srv, '/v1/chat/completions', auth, Array(64).fill(MiB));
    const bomb = gzipSync(Buffer.alloc(128 << 20, 0x20));
    assert.ok(bomb.length < 1 << 20);
    const gz = { ...auth, 'content-encoding': 'gzip', 'content-length': String(bomb.length) };
    const gzipped = await rawPost(srv, '/v1/chat/completions', gz, [bomb]);
    const { authorization, ...noauth } = gz;
    const unauth = await rawPost(srv, '/v1/chat/completions', noauth, [bomb]);
    const chunkedElsewhere = await rawPost(srv, '/nowhere', auth, Array(64).fill(MiB));
    for (const s of [chunked, gzipped, chunkedElsewhere]) assert.ok(s === 413 || s === 404 || s === 'reset', String(s));
    assert.ok(unauth === 401 || unauth === 'reset', String(unauth));
    assert.equal(chunked === 'reset' ? 413 : chunked, 413);
    const growth = peakRss(srv) - base;
    assert.ok(growth < 24 << 20, `peak RSS grew by ${(growth / 1048576).toFixed(1)} MiB`);
    const ok = await post(srv, '/v1/chat/completions', { model: MODEL_ID, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }, auth);
    assert.equal(ok.status, 200);
  } finally {
    await srv.stop();
  }
});

const longPrompt = Array.from({ length: 480 }, (_, i) => 300 + (i % 200));
const CHUNK = 16, DELAY = 100; // 30 chunks of 100 ms: a 3-second prefill

test('a client that leaves during a long prefill frees the model within a chunk', async () => {
  // --retry-grace 0: a non-streaming request whose client left is not kept for a retry.
  const srv = await startServer(['--prefill-chunk', String(CHUNK), '--test-prefill-delay-ms', String(DELAY),
                                 '--state-cache-mb', '0', '--retry-grace', '0']);
  try {
    for (const stream of [false, true]) {
      const abort = new AbortController();
      const pending = fetch(srv.url + '/v1/completions', {
        method: 'POST', headers: { 'content-type': 'application/json' }, signal: abort.signal,
        body: JSON.stringify({ model: MODEL_ID, prompt: longPrompt, max_tokens: 1, stream }),
      }).catch(() => null);
      await waitFor(async () => (await (await fetch(srv.url + '/health')).json()).generating, 5000, 'the prefill');
      await sleep(300);
      abort.abort();
      await pending;
      const t0 = Date.now();
      const r = await post(srv, '/v1/completions', { model: MODEL_ID, prompt: [448, 259], max_tokens: 1 });
      const ms = Date.now() - t0;
      assert.equal(r.status, 200);
      assert.ok(ms < 1500, `the next request waited ${ms} ms (stream: ${stream})`);
    }
  } finally {
    await srv.stop();
  }
});

test('shutdown interrupts a long prefill', async () => {
  const srv = await startServer(['--prefill-chunk', String(CHUNK), '--test-prefill-delay-ms', '300',
                                 '--shutdown-grace', '0']);
  const pending = post(srv, '/v1/completions', { model: MODEL_ID, prompt: longPrompt, max_tokens: 1 }).catch(() => null);
  await waitFor(async () => (await (await fetch(srv.url + '/health')).json()).generating, 5000, 'the prefill');
  const t0 = Date.now();
  const { code } = await srv.stop();
  assert.equal(code, 0);
  assert.ok(Date.now() - t0 < 3000, `exit took ${Date.now() - t0} ms (the prefill alone is 9 s)`);
  const r = await pending;
  if (r) assert.equal(r.status, 503);
});

test('prompt-token cap and bounded tool names', async () => {
  const srv = await startServer(['--max-prompt-tokens', '100']);
  try {
    const r = await post(srv, '/v1/completions', { model: MODEL_ID, prompt: longPrompt, max_tokens: 1 });
    assert.equal(r.status, 400);
    assert.equal(r.body.error.code, 'prompt_too_long');
    const tool = { type: 'function', function: { name: 'x'.repeat(100000), parameters: {} } };
    const t = await post(srv, '/v1/chat/completions',
      { model: MODEL_ID, messages: [{ role: 'user', content: 'hi' }], tools: [tool], max_tokens: 1 });
    assert.equal(t.status, 400);
    assert.equal(t.body.error.param, 'tools[0].function.name');
  } finally {
    await srv.stop();
  }
});

test('SSE pings arrive while a long prompt is prefilled', async () => {
  const srv = await startServer(['--prefill-chunk', String(CHUNK), '--test-prefill-delay-ms', '60',
                                 '--sse-ping-seconds', '0.2']);
  try {
    const res = await fetch(srv.url + '/v1/completions', {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL_ID, prompt: longPrompt, max_tokens: 2, stream: true }),
    });
    const text = await res.text();
    const firstData = text.indexOf('data: ');
    const pings = text.slice(0, firstData).split('\n').filter((l) => l === ': ping').length;
    assert.ok(pings >= 4, `${pings} pings before the first token in:\n${text.slice(0, 300)}`);
    assert.ok(text.endsWith('data: [DONE]\n\n'));
  } finally {
    await srv.stop();
  }
});

test('/health keeps answering while 100 connections trickle their headers; they are cut off', async () => {
  const srv = await startServer(['--header-timeout', '2']);
  const socks = [];
  try {
    let closed = 0;
    for (let i = 0; i < 100; i++) {
      const s = net.connect(srv.port, '127.0.0.1');
      s.on('error', () => {});
      s.on('close', () => closed++);
      socks.push(s);
    }
    const header = 'POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ' + 'a'.repeat(100);
    let i = 0;
    const timer = setInterval(() => {
      for (const s of socks) if (!s.destroyed) s.write(header[i % header.length]);
      i++;
    }, 250);
    try {
      for (let k = 0; k < 6; k++) {
        const t0 = Date.now();
        const r = await withTimeout(fetch(srv.url + '/health'), 1000, '/health under slow clients');
        assert.equal(r.status, 200);
        assert.ok(Date.now() - t0 < 1000);
        await sleep(300);
      }
      await waitFor(() => closed >= 100, 6000, `the slow connections to be closed (${closed} so far)`);
    } finally {
      clearInterval(timer);
    }
  } finally {
    for (const s of socks) s.destroy();
    await srv.stop();
  }
});

test('browser-style requests: text/plain bodies and foreign Host headers are refused', async () => {
  const srv = await startServer();
  try {
    const body = JSON.stringify({ model: MODEL_ID, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 });
    const plain = await post(srv, '/v1/chat/completions', body, { 'content-type': 'text/plain' });
    assert.equal(plain.status, 415);
    const form = await post(srv, '/v1/chat/completions', body, { 'content-type': 'application/x-www-form-urlencoded' });
    assert.equal(form.status, 415);
    const status = (host) => new Promise((resolve, reject) => {
      http.get({ host: '127.0.0.1', port: srv.port, path: '/v1/models', headers: { host } }, (res) => {
        res.resume();
        resolve(res.statusCode);
      }).on('error', reject);
    });
    assert.equal(await status('evil.example:' + srv.port), 403);
    assert.equal(await status('localhost:' + srv.port), 200);
    assert.equal(await status('127.0.0.1:' + srv.port), 200);
  } finally {
    await srv.stop();
  }
  const open = await startServer(['--allowed-hosts', 'evil.example']);
  try {
    const r = await new Promise((resolve) => http.get({ host: '127.0.0.1', port: open.port, path: '/v1/models',
      headers: { host: 'evil.example' } }, (res) => { res.resume(); resolve(res.statusCode); }));
    assert.equal(r, 200);
  } finally {
    await open.stop();
  }
});

test('a retried identical request takes over the running one instead of generating again', async () => {
  const srv = await startServer(['--prefill-chunk', String(CHUNK), '--test-prefill-delay-ms', String(DELAY),
                                 '--retry-grace', '5', '--state-cache-mb', '0']);
  try {
    const body = { model: MODEL_ID, prompt: longPrompt, max_tokens: 3 };
    // Two at once: the second waits for the first's reply.
    const first = post(srv, '/v1/completions', body);
    await waitFor(async () => (await (await fetch(srv.url + '/health')).json()).generating, 5000, 'the prefill');
    const second = await post(srv, '/v1/completions', body);
    const one = await first;
    assert.equal(one.status, 200);
    assert.deepEqual(second.body, one.body); // the same reply, id included
    // A client that times out and retries: the retry picks up the running generation.
    const abort = new AbortController();
    const gone = fetch(srv.url + '/v1/completions', {
      method: 'POST', headers: { 'content-type': 'application/json' }, signal: abort.signal,
      body: JSON.stringify({ ...body, seed: 7 }),
    }).catch(() => null);
    await waitFor(async () => (await (await fetch(srv.url + '/health')).json()).generating, 5000, 'the prefill');
    abort.abort();
    await gone;
    await sleep(500);
    const retry = await post(srv, '/v1/completions', { ...body, seed: 7 });
    assert.equal(retry.status, 200);
    const h = await (await fetch(srv.url + '/health')).json();
    assert.equal(h.requests.deduplicated, 2);
    assert.equal(h.requests.completed, 2); // two generations for four requests
    await waitFor(() => (srv.stderr().match(/ 200 deduplicated/g) || []).length === 2, 5000, 'two deduplicated log lines');
  } finally {
    await srv.stop();
  }
});

test('stream_options.include_progress: progress chunks (choices []) the openai client\'s plain loop passes over', async () => {
  const srv = await startServer(['--prefill-chunk', String(CHUNK)]);
  try {
    const res = await fetch(srv.url + '/v1/completions', {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL_ID, prompt: longPrompt, max_tokens: 2, stream: true,
                             stream_options: { include_progress: true } }),
    });
    const text = await res.text();
    assert.doesNotMatch(text, /^event:/m); // SDKs hand every event's data to the caller as a chunk
    const chunks = text.split('\n\n').filter((e) => e.startsWith('data: {')).map((e) => JSON.parse(e.slice(6)));
    const progress = chunks.filter((c) => c.prompt_progress);
    assert.equal(progress.length, longPrompt.length / CHUNK);
    assert.ok(progress.every((c) => c.object === 'text_completion' && Array.isArray(c.choices) && c.choices.length === 0));
    assert.equal(progress.at(-1).prompt_progress.processed, longPrompt.length);
    assert.ok(progress.every((c, i) => c.prompt_progress.total === longPrompt.length &&
                                       c.prompt_progress.processed === (i + 1) * CHUNK));

    // The SDK's documented loops, with and without progress: no TypeError, the same text.
    const client = new OpenAI({ baseURL: srv.baseURL, apiKey: 'unused', maxRetries: 0 });
    const messages = [{ role: 'user', content: 'word '.repeat(80) }];
    const seen = {};
    for (const include_progress of [true, false]) {
      let chat = '', n = 0;
      const stream = await client.chat.completions.create({
        model: MODEL_ID, messages, max_tokens: 4, temperature: 0, reasoning_effort: 'none', stream: true,
        stream_options: { include_progress },
      });
      for await (const chunk of stream) {
        chat += chunk.choices[0]?.delta?.content || '';
        if (chunk.prompt_progress) n++;
      }
      let completion = '';
      const cstream = await client.completions.create({
        model: MODEL_ID, prompt: longPrompt, max_tokens: 4, temperature: 0, stream: true,
        stream_options: { include_progress },
      });
      for await (const chunk of cstream) completion += chunk.choices[0]?.text || '';
      seen[include_progress] = { chat, completion, n };
    }
    assert.ok(seen[true].n >= 2, `progress chunks in the chat stream: ${seen[true].n}`);
    assert.equal(seen[false].n, 0); // only when asked for
    assert.equal(seen[true].chat, seen[false].chat);
    assert.equal(seen[true].completion, seen[false].completion);
  } finally {
    await srv.stop();
  }
});
