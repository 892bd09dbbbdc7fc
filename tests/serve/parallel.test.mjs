// `sluice serve --parallel N` on nanoK3 with the official openai client: 8
// concurrent clients with different prompts each get, greedy, exactly what they
// get alone (the default --parallel for the budget; --parallel 4: four decode
// together and four wait; --parallel 8: all together; joining prompts ride in
// the decode passes), and the concurrent requests take fewer passes than alone
// (their rows share passes); a client that disconnects mid-batch frees its row
// at once (/metrics' active sequences drop and a new request runs while the
// others still generate).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, withTimeout, waitFor } from './helpers.mjs';

const NANO = process.env.SLUICE_NANOK3;
if (!NANO) throw new Error('set SLUICE_NANOK3 (tests/serve/run.sh does)');

const PROMPTS = [
  'In the beginning God created',
  'The quick brown fox jumps over',
  'Once upon a time there was a',
  'And God said, Let there be light',
  'The king of the north rode',
  'Water is made of hydrogen and',
  'And the earth was without form, and void; and darkness',
  'She opened the door and saw',
];
const MAX = 12;

async function metric(srv, name) {
  const text = await (await fetch(srv.url + '/metrics')).text();
  const m = text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : 0;
}

function ask(client, prompt, extra = {}) {
  return client.completions.create({
    model: 'nanok3', prompt, max_tokens: MAX, temperature: 0, ignore_eos: true, return_token_ids: true, ...extra,
  });
}

const pick = (r) => ({ ids: r.choices[0].token_ids, text: r.choices[0].text, finish: r.choices[0].finish_reason });

let alone; // each prompt's reply with the server to itself

test('the default --parallel, 4 and 8: 8 concurrent clients get, greedy, what each gets alone', async () => {
  for (const want of ['default', 4, 8]) {
    const flags = want === 'default' ? [] : ['--parallel', String(want)];
    const srv = await startServer(['--model', NANO, ...flags, '--queue', '8'], { defaultParallel: true });
    try {
      const health = await (await fetch(srv.url + '/health')).json();
      let n = want;
      if (want === 'default') {
        // Chosen for the budget: nanoK3's states are small, so more than one decodes together.
        const m = srv.stderr().match(/--parallel (\d+): up to \1 sequences decoded together \(the default for this budget\)/);
        assert.ok(m, srv.stderr());
        n = Number(m[1]);
        assert.ok(n >= 2, `default --parallel ${n}`);
      }
      assert.equal(health.parallel, n);
      assert.match(srv.stderr(), new RegExp(`--parallel ${n}: up to ${n} sequences`));
      const client = new OpenAI({ baseURL: srv.baseURL, apiKey: 'none', maxRetries: 0, timeout: 120000 });
      if (!alone) {
        alone = [];
        const p0 = await metric(srv, 'sluice_decode_passes_total');
        for (const p of PROMPTS) alone.push(pick(await ask(client, p)));
        alone.passes = (await metric(srv, 'sluice_decode_passes_total')) - p0;
        for (const a of alone) assert.equal(a.ids.length, MAX);
      }
      const p0 = await metric(srv, 'sluice_decode_passes_total');
      const r0 = await metric(srv, 'sluice_decode_rows_total');
      const together = await withTimeout(Promise.all(PROMPTS.map((p) => ask(client, p))), 120000, '8 concurrent');
      together.forEach((r, i) => assert.deepEqual(pick(r), alone[i], `prompt ${i} with --parallel ${n}`));
      const passes = (await metric(srv, 'sluice_decode_passes_total')) - p0;
      const rows = (await metric(srv, 'sluice_decode_rows_total')) - r0;
      // Together, the 8 replies' rows share passes: far fewer passes than one after another.
      assert.ok(passes > 0 && passes < 0.6 * alone.passes, `${passes} passes together vs ${alone.passes} alone`);
      assert.ok(rows / passes > 2, `${rows} rows in ${passes} passes`);
      assert.equal(await metric(srv, 'sluice_active_sequences'), 0);
    } finally {
      const { code } = await srv.stop();
      assert.equal(code, 0, srv.stderr());
    }
  }
});

test('a client that disconnects mid-batch frees its row at once', async () => {
  const srv = await startServer(['--model', NANO, '--parallel', '3', '--queue', '0']);
  try {
    const long = (i, signal) =>
      fetch(srv.url + '/v1/completions', {
        method: 'POST', headers: { 'content-type': 'application/json' }, signal,
        body: JSON.stringify({ model: 'nanok3', prompt: PROMPTS[i], max_tokens: 4000, ignore_eos: true, stream: true }),
      });
    const aborts = [0, 1, 2].map(() => new AbortController());
    const streams = await Promise.all(aborts.map((a, i) => long(i, a.signal)));
    const readers = streams.map((s) => s.body.getReader());
    for (const r of readers) await withTimeout(r.read(), 30000, 'first chunk');
    assert.equal(await metric(srv, 'sluice_active_sequences'), 3);
    const client = new OpenAI({ baseURL: srv.baseURL, apiKey: 'none', maxRetries: 0, timeout: 60000 });
    await assert.rejects(ask(client, PROMPTS[3]), (e) => e.status === 429); // every row is taken
    aborts[1].abort();
    await waitFor(async () => (await metric(srv, 'sluice_active_sequences')) === 2, 5000, 'the row freed');
    // A new request starts at once and finishes while the other two still generate.
    const t0 = Date.now();
    const r = await withTimeout(ask(client, PROMPTS[3]), 30000, 'a request in the freed row');
    assert.ok(Date.now() - t0 < 20000);
    assert.equal(r.choices[0].token_ids.length, MAX);
    if (alone) assert.deepEqual(pick(r), alone[3]);
    assert.equal(await metric(srv, 'sluice_active_sequences'), 2);
    aborts[0].abort();
    aborts[2].abort();
    await waitFor(async () => (await metric(srv, 'sluice_active_sequences')) === 0, 5000, 'all rows freed');
  } finally {
    await srv.stop();
  }
});
