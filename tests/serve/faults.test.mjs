// Read faults are per request: with the spine streamed (the smallest budget)
// and resident, --parallel 1 and 4, a transient EIO (SLUICE_FAULT_READ, the
// read seam of src/base/read_fault.h) on expert, spine and embedding bytes
// fails only the requests that hit it; afterwards 10 of 10 requests get what
// a clean server answers. And the contract: at the minimum budget, after a
// shard is truncated and restored, the next request returns 200. /health
// says "degraded" while reads fail and "ok" again after a success.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, post, health, BIN, MODEL, MODEL_ID } from './helpers.mjs';

const PROMPT = [448, 259, 309, 412, 370];
const body = { model: MODEL_ID, prompt: PROMPT, max_tokens: 6, temperature: 0, ignore_eos: true };
const answer = (r) => ({ status: r.status, text: r.body?.choices?.[0]?.text });

let dir; // a copy of the fixture (its directory's name is the model id)
let clean; // a clean server's answer

// The tensors' absolute byte ranges in their shards: name -> {file, begin, length}.
function tensorRanges(model) {
  const index = JSON.parse(fs.readFileSync(path.join(model, 'model.safetensors.index.json'), 'utf8'));
  const out = {};
  for (const file of new Set(Object.values(index.weight_map))) {
    const fd = fs.openSync(path.join(model, file), 'r');
    const len = Buffer.alloc(8);
    fs.readSync(fd, len, 0, 8, 0);
    const n = Number(len.readBigUInt64LE(0));
    const head = Buffer.alloc(n);
    fs.readSync(fd, head, 0, n, 8);
    fs.closeSync(fd);
    for (const [name, t] of Object.entries(JSON.parse(head.toString('utf8')))) {
      if (name === '__metadata__') continue;
      out[name] = { file, begin: 8 + n + t.data_offsets[0], length: t.data_offsets[1] - t.data_offsets[0] };
    }
  }
  return out;
}

// The bytes of every tensor whose name matches, when they are one run in one
// shard, less the 4096-byte blocks shared with other tensors (a direct read
// of a neighbour would hit those too).
function interior(ranges, pattern) {
  const hits = Object.entries(ranges).filter(([k]) => pattern.test(k)).map(([, r]) => r);
  assert.ok(hits.length > 0, `no tensor matches ${pattern}`);
  assert.ok(hits.every((r) => r.file === hits[0].file), `${pattern}: in several shards`);
  const begin = Math.min(...hits.map((r) => r.begin));
  const end = Math.max(...hits.map((r) => r.begin + r.length));
  const a = Math.ceil(begin / 4096) * 4096, b = Math.floor(end / 4096) * 4096;
  assert.ok(b > a, `${pattern}: no block of its own`);
  return { file: hits[0].file, begin: a, length: b - a };
}

// The budget a too-small one's error names as the minimum (for these args).
function minimumBudget(args) {
  return new Promise((resolve, reject) => {
    execFile(BIN, ['serve', ...args, '--port', '0', '--ram-budget', '1M'], { timeout: 60000 }, (err, stdout, stderr) => {
      const m = stderr.match(/try --ram-budget (\S+)/);
      if (!m) return reject(new Error(`no minimum in: ${stderr}`));
      resolve(m[1]);
    });
  });
}

// A server at the smallest budget it starts with: the minimum counts the
// process's measured baseline, which varies a little from run to run, so a
// start refused for the budget is tried again at the budget that refusal names.
async function startAtMinimum(args, opts = {}, first = undefined) {
  let budget = first ?? (await minimumBudget(args));
  for (let attempt = 0; ; attempt++) {
    try {
      return await startServer([...args, '--ram-budget', budget], opts);
    } catch (e) {
      const m = String(e.message).match(/try --ram-budget (\S+)/);
      if (!m || attempt === 3) throw e;
      budget = m[1];
    }
  }
}

// A server whose spine streams whole: at the minimum, a run that measures a smaller
// baseline than the one that named the minimum has room for part of the spine, so
// such a start is stopped and tried again with that much less budget.
async function startStreamed(args, opts = {}) {
  let budget;
  for (let attempt = 0; ; attempt++) {
    const srv = await startAtMinimum(args, opts, budget);
    const plan = (await health(srv)).memory_plan;
    if (plan.spine_resident === 0 || attempt === 5) return srv;
    await srv.stop();
    budget = String(plan.budget - plan.spine_resident);
  }
}

before(async () => {
  dir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-faults-')), MODEL_ID);
  fs.cpSync(MODEL, dir, { recursive: true });
  const srv = await startServer(['--model', dir]);
  try {
    clean = answer(await post(srv, '/v1/completions', body));
    assert.equal(clean.status, 200);
  } finally {
    await srv.stop();
  }
});

after(() => fs.rmSync(path.dirname(dir), { recursive: true, force: true }));

test('contract: at the minimum budget a truncated and restored shard answers 200 again', async () => {
  const srv = await startStreamed(['--model', dir]);
  try {
    assert.equal((await health(srv)).memory_plan.spine_resident, 0, 'the spine streams at the minimum');
    assert.deepEqual(answer(await post(srv, '/v1/completions', body)), clean);
    const shard = path.join(dir, 'model-00001-of-00003.safetensors');
    const saved = fs.readFileSync(shard);
    fs.truncateSync(shard, Math.floor(saved.length / 2));
    const failed = await post(srv, '/v1/completions', body);
    assert.equal(failed.status, 500);
    assert.match(failed.body.error.message, /model-00001-of-00003\.safetensors/);
    const h = await health(srv);
    assert.equal(h.status, 'degraded');
    assert.match(h.reads.last_error, /model-00001-of-00003\.safetensors/);
    fs.writeFileSync(shard, saved);
    assert.deepEqual(answer(await post(srv, '/v1/completions', body)), clean);
    assert.equal((await health(srv)).status, 'ok');
    for (let i = 0; i < 10; i++) assert.deepEqual(answer(await post(srv, '/v1/completions', body)), clean, `request ${i}`);
  } finally {
    const { code } = await srv.stop();
    assert.equal(code, 0, srv.stderr());
  }
});

test('a transient EIO on expert, spine or embedding bytes fails only the requests that hit it', async () => {
  const ranges = tensorRanges(dir);
  const config = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
  const row = 2 * (config.text_config ?? config).hidden_size; // bf16
  const embed = Object.entries(ranges).find(([k]) => /embed_tokens\.weight$/.test(k))[1];
  // Every expert of the first MoE layer (whichever the prompt routes to), the
  // head (streamed: read in every pass that wants logits), the embedding row
  // of a prompt token.
  const targets = {
    expert: interior(ranges, /layers\.1\.block_sparse_moe\.experts\.\d+\./),
    spine: interior(ranges, /lm_head\.weight$/),
    embedding: { file: embed.file, begin: embed.begin + PROMPT[1] * row, length: row },
  };
  for (const streamed of [true, false]) {
    for (const parallel of [1, 4]) {
      for (const [what, t] of Object.entries(targets)) {
        if (what === 'spine' && !streamed) continue; // a resident spine is read once, at load
        const where = `${streamed ? 'streamed' : 'resident'} spine, --parallel ${parallel}, ${what}`;
        const env = { SLUICE_FAULT_READ: `eio:${t.file}:${t.begin}+${t.length}:1` }; // the first read of them fails
        const args = ['--model', dir, '--parallel', String(parallel)];
        const srv = streamed ? await startStreamed(args, { env }) : await startServer(args, { env });
        try {
          if (streamed) assert.equal((await health(srv)).memory_plan.spine_resident, 0, `${where}: the spine streams`);
          // Distinct bodies (a different `user`), so that none is answered as a retry of another.
          const first = await Promise.all(
            Array.from({ length: parallel }, (_, i) => post(srv, '/v1/completions', { ...body, user: `client ${i}` })),
          );
          let failed = 0;
          for (const r of first) {
            if (r.status === 200) {
              assert.deepEqual(answer(r), clean, where);
              continue;
            }
            failed++;
            assert.equal(r.status, 500, where);
            assert.match(r.body.error.message, new RegExp(t.file.replace(/\./g, '\\.')), where);
          }
          // The fault fired (a failed guess is read again by the fetch that needs it: then no request fails).
          const h = await health(srv);
          assert.ok(h.reads.errors >= 1, `${where}: the fault never fired`);
          if (failed > 0 && parallel === 1) assert.equal(h.status, 'degraded', where);
          if (what !== 'expert') assert.ok(failed >= 1, `${where}: no request failed`);
          for (let i = 0; i < 10; i++)
            assert.deepEqual(answer(await post(srv, '/v1/completions', body)), clean, `${where}: request ${i}`);
          assert.equal((await health(srv)).status, 'ok', where);
        } finally {
          const { code } = await srv.stop();
          assert.equal(code, 0, `${where}: ${srv.stderr()}`);
        }
      }
    }
  }
});
