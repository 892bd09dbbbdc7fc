// The model's own defaults (generation_config.json) in `sluice serve` and `sluice run`
// (issue 40): the official openai client's first requests on nanoK3, with no extra
// parameters, get text; the thinking switches other servers' clients send are honoured;
// `run --prompt` samples as the server does unless --temperature 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import OpenAI from 'openai';
import { BIN, MODEL_ID, startServer, post } from './helpers.mjs';

const NANO = process.env.SLUICE_NANOK3;
if (!NANO) throw new Error('set SLUICE_NANOK3 (tests/serve/run.sh does)');

function run(args) {
  return new Promise((resolve, reject) => {
    execFile(BIN, ['run', ...args], { timeout: 120000 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`sluice run ${args.join(' ')}: ${err.message}\n${stderr}`));
      resolve(stdout);
    });
  });
}

test('serve -m nanok3, no flags: the openai client\'s first chat and responses calls return text', async () => {
  // `serve -m DIR` as a user types it; startServer adds only the loopback port 0.
  const srv = await startServer(['-m', NANO], { defaultParallel: true });
  try {
    assert.match(srv.stderr(), /request defaults \(generation_config\.json\): reasoning effort none, temperature 0\.8, top-p 0\.9/);
    const client = new OpenAI({ baseURL: srv.baseURL, apiKey: 'unused', maxRetries: 0 });
    const chat = await client.chat.completions.create({ model: 'nanok3', messages: [{ role: 'user', content: 'Hello' }] });
    assert.ok(chat.choices[0].message.content.length > 0, JSON.stringify(chat));
    assert.equal(chat.choices[0].message.reasoning_content, undefined); // no thinking: the model's default
    assert.ok(chat.usage.completion_tokens <= 256); // generation_config's max_new_tokens

    const resp = await client.responses.create({ model: 'nanok3', input: 'Hello' });
    assert.ok(resp.output_text.length > 0, JSON.stringify(resp));

    // The contract: a raw POST without a model, 30 tokens.
    const raw = await post(srv, '/v1/chat/completions', { messages: [{ role: 'user', content: 'Hello' }], max_tokens: 30 });
    assert.equal(raw.status, 200, JSON.stringify(raw.body));
    assert.equal(raw.body.model, 'nanok3');
    assert.ok(raw.body.choices[0].message.content.length > 0, JSON.stringify(raw.body));

    // A request's own fields override the defaults: greedy is greedy.
    const greedy = { model: 'nanok3', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 12, temperature: 0 };
    const a = await client.chat.completions.create({ ...greedy, seed: 1 });
    const b = await client.chat.completions.create({ ...greedy, seed: 2 });
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  } finally {
    await srv.stop();
  }
});

test('thinking switches: chat_template_kwargs, enable_thinking, thinking.type, reasoning_effort', async () => {
  const srv = await startServer(); // the fixture: no generation_config.json, so thinking (max) by default
  try {
    const client = new OpenAI({ baseURL: srv.baseURL, apiKey: 'unused', maxRetries: 0 });
    const base = { model: MODEL_ID, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4, temperature: 0 };
    const on = await client.chat.completions.create(base);
    assert.equal(typeof on.choices[0].message.reasoning_content, 'string');
    const offs = [
      { chat_template_kwargs: { thinking: false } },
      { chat_template_kwargs: { enable_thinking: false } },
      { enable_thinking: false },
      { thinking: { type: 'disabled' } },
      { reasoning_effort: 'none' },
    ];
    const prompts = new Set();
    for (const extra of offs) {
      const r = await client.chat.completions.create({ ...base, ...extra });
      assert.equal(r.choices[0].message.reasoning_content, undefined, JSON.stringify(extra));
      prompts.add(r.usage.prompt_tokens);
    }
    assert.equal(prompts.size, 1); // one prompt: <response> opened, no effort message
    assert.ok([...prompts][0] < on.usage.prompt_tokens);

    const clash = await post(srv, '/v1/chat/completions',
                             { ...base, chat_template_kwargs: { thinking: false }, reasoning_effort: 'high' });
    assert.equal(clash.status, 400);
    assert.equal(clash.body.error.param, 'reasoning_effort');
  } finally {
    await srv.stop();
  }
});

test('run --prompt samples like the chat (generation_config.json) unless --temperature 0', async () => {
  const args = ['-m', NANO, '--prompt', 'And the king said unto', '-n', '24'];
  const [s1, s2] = [await run([...args, '--seed', '1']), await run([...args, '--seed', '2'])];
  assert.notEqual(s1, s2); // sampled: the seed matters
  const [g1, g2] = [await run([...args, '--temperature', '0', '--seed', '1']),
                    await run([...args, '--temperature', '0', '--seed', '2'])];
  assert.equal(g1, g2); // greedy
  // --tokens, the probe for checks, stays greedy.
  const ids = ['-m', NANO, '--tokens', '448,259,309', '-n', '8', '--ids'];
  assert.equal(await run([...ids, '--seed', '1']), await run([...ids, '--seed', '2']));
});
