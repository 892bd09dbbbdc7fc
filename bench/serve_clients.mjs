// Aggregate decode speed of `sluice serve` with 1, 2, 4, 8 concurrent clients.
//   node bench/serve_clients.mjs SLUICE_BINARY MODEL_DIR [--clients 1,2,4,8] [--tokens 16]
//        [--requests 1] [--warmup TOKENS] [-- extra serve flags, e.g. --ram-budget 4G --parallel 8]
// Starts one server (default --parallel 8 --draft none), then for each client
// count C: C clients, each with its own prompt, send --requests greedy
// completions of --tokens tokens (ignore_eos) at once. Prints one JSON line per C:
// wall seconds, completion tokens, aggregate tokens/s, decode passes, rows per
// pass, prompt rows that rode in decode passes, weight bytes read per generated
// token (/metrics), and the ratios to C = 1
// of the same run. Needs node >= 18 (fetch); no npm packages.
import { spawn } from 'node:child_process';
import { benchArgs } from './bench_args.mjs';

const { bin, model, passed: serveFlags, opt } = benchArgs(
  'usage: node bench/serve_clients.mjs SLUICE_BINARY MODEL_DIR [--clients 1,2,4,8] [--tokens N] [--requests N] [--warmup N] [-- serve flags]');
const clients = opt('--clients', '1,2,4,8').split(',').map(Number);
const tokens = Number(opt('--tokens', '16'));
const requests = Number(opt('--requests', '1'));
const warmup = Number(opt('--warmup', String(tokens)));  // tokens of the untimed first request
const flags = [...serveFlags];
if (!flags.includes('--parallel')) flags.push('--parallel', String(Math.max(...clients)));
if (!flags.includes('--draft')) flags.push('--draft', 'none');

const proc = spawn(bin, ['serve', '--model', model, '--host', '127.0.0.1', '--port', '0', '--queue', '64', ...flags], {
  stdio: ['ignore', 'pipe', 'pipe'],
});
let stderr = '';
proc.stderr.on('data', (d) => (stderr += d));
const port = await new Promise((resolve, reject) => {
  let out = '';
  proc.stdout.on('data', (d) => {
    out += d;
    const m = out.match(/listening on http:\/\/127\.0\.0\.1:(\d+)\/v1/);
    if (m) resolve(Number(m[1]));
  });
  proc.on('exit', (c) => reject(new Error(`serve exited ${c}:\n${stderr}`)));
});
const url = `http://127.0.0.1:${port}`;

async function metrics() {
  const text = await (await fetch(url + '/metrics')).text();
  const get = (name) => Number((text.match(new RegExp(`^${name} (\\S+)$`, 'm')) ?? [0, 0])[1]);
  return {
    passes: get('sluice_decode_passes_total'),
    rows: get('sluice_decode_rows_total'),
    fused: get('sluice_fused_prompt_rows_total'),
    bytes: get('sluice_weight_bytes_read_total'),
    tokens: get('sluice_completion_tokens_total'),
  };
}

// Different prompts per client (ids below the special range of any K3 vocabulary).
const prompt = (c, r) => Array.from({ length: 8 }, (_, i) => 1000 + ((c * 7919 + r * 104729 + i * 31) % 5000));
async function client(c, n = requests, max_tokens = tokens) {
  for (let r = 0; r < n; r++) {
    const res = await fetch(url + '/v1/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: id, prompt: prompt(c, r), max_tokens, temperature: 0, ignore_eos: true }),
    });
    if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
    await res.json();
  }
}

const health = await (await fetch(url + '/health')).json();
const id = health.model;
let base;
try {
  // A warm-up request (page cache, expert cache, first-pass costs) before timing.
  await client(999, 1, warmup);
  for (const C of clients) {
    const m0 = await metrics();
    const t0 = performance.now();
    await Promise.all(Array.from({ length: C }, (_, c) => client(c)));
    const secs = (performance.now() - t0) / 1000;
    const m1 = await metrics();
    const toks = m1.tokens - m0.tokens;
    const rec = {
      clients: C, parallel: health.parallel, seconds: secs, completion_tokens: toks,
      tokens_per_s: toks / secs, passes: m1.passes - m0.passes,
      rows_per_pass: (m1.rows - m0.rows) / Math.max(1, m1.passes - m0.passes),
      fused_prompt_rows: m1.fused - m0.fused,
      bytes_per_token: (m1.bytes - m0.bytes) / Math.max(1, toks),
    };
    base ??= rec;
    rec.vs_one_client = { tokens_per_s: rec.tokens_per_s / base.tokens_per_s, bytes_per_token: rec.bytes_per_token / base.bytes_per_token };
    console.log(JSON.stringify({ model: id, ...rec }));
  }
} finally {
  proc.kill('SIGTERM');
}
