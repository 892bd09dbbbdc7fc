// SIGTERM stops `sluice serve` gracefully: it stops listening, a running
// generation finishes (within --shutdown-grace) or is cancelled with an error
// event, waiting requests get 503, and the process exits 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, post, openaiError, readSSE, waitFor, withTimeout, health, MODEL_ID } from './helpers.mjs';

test('SIGTERM lets the running generation finish, then exits 0', async () => {
  const srv = await startServer([]);
  const client = new OpenAI({ baseURL: srv.baseURL, apiKey: 'none', maxRetries: 0, timeout: 120000 });
  const stream = await client.chat.completions.create({
    model: MODEL_ID, messages: [{ role: 'user', content: 'Go on' }], max_tokens: 40, temperature: 0,
    ignore_eos: true, reasoning_effort: 'none', stream: true, stream_options: { include_usage: true },
  });
  const chunks = [];
  let signalled = false;
  for await (const c of stream) {
    chunks.push(c);
    if (!signalled) {
      srv.proc.kill('SIGTERM'); // after the first chunk: mid-generation
      signalled = true;
    }
  }
  const last = chunks[chunks.length - 1];
  assert.equal(last.usage.completion_tokens, 40); // finished in full
  assert.equal(chunks[chunks.length - 2].choices[0].finish_reason, 'length');
  const { code, signal } = await withTimeout(srv.exited, 30000, 'exit after SIGTERM');
  assert.equal(signal, null);
  assert.equal(code, 0, srv.stderr());
  await assert.rejects(fetch(srv.url + '/health')); // no longer listening
});

test('SIGTERM: waiting requests get 503, the running one is cancelled after the grace period', async () => {
  const srv = await startServer(['--queue', '2', '--max-tokens', '100000', '--shutdown-grace', '0.5']);
  const blocker = await fetch(srv.url + '/v1/completions', {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL_ID, prompt: [448, 259], max_tokens: 100000, ignore_eos: true, stream: true }),
  });
  assert.equal(blocker.status, 200);
  const events = readSSE(blocker);
  await waitFor(async () => (await health(srv)).generating, 30000, 'the blocker to generate');
  const waiting = post(srv, '/v1/chat/completions', { model: MODEL_ID, messages: [{ role: 'user', content: 'x' }], max_tokens: 2 });
  await waitFor(async () => (await health(srv)).waiting === 1, 30000, 'a waiting request');

  srv.proc.kill('SIGTERM');
  const w = await withTimeout(waiting, 30000, 'the waiting request');
  assert.equal(w.status, 503);
  assert.equal(openaiError(w.body).code, 'shutting_down');
  const ev = await withTimeout(events, 30000, 'the blocker stream to end');
  const lastEvent = ev[ev.length - 1];
  assert.equal(openaiError(lastEvent).code, 'shutting_down'); // an error event, no [DONE]
  assert.ok(ev.slice(0, -1).every((e) => e.object === 'text_completion'));
  const { code } = await withTimeout(srv.exited, 30000, 'exit');
  assert.equal(code, 0, srv.stderr());
});
