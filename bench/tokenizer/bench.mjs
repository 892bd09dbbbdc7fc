// Encode throughput of sluice's tokenizer next to npm implementations, same text,
// same run, one core. Not a test: prints a table. Each number is the best of
// several runs (sluice 5, js-tiktoken 2, gpt-tokenizer 3), to damp noise from
// other load on the machine; the "vs sluice" column checks the ids are identical.
//
//   node bench.mjs <path to build/sluice> [MB]      (run from the npm install folder)
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { Tiktoken } from 'js-tiktoken/lite';
import { makeText } from './corpus.mjs';
import { exportEncoding } from './export.mjs';

const sluice = process.argv[2];
const mb = Number(process.argv[3] || 10);
if (!sluice) { console.error('usage: node bench.mjs <sluice binary> [MB]'); process.exit(2); }

const text = makeText(42, mb * 1e6);
const bytes = Buffer.byteLength(text, 'utf8');
writeFileSync('bench.txt', text);
console.log(`text: ${(bytes / 1e6).toFixed(2)} MB (seeded: prose ~70%, contractions, numbers, code, other scripts)`);

function sluiceRun(args) {
  const r = spawnSync(sluice, args, { maxBuffer: 1 << 30, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`sluice ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

function timeIt(fn, reps) {
  let best = Infinity, out;
  for (let i = 0; i < reps; i++) {
    const t0 = process.hrtime.bigint();
    out = fn();
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
  }
  return { best, out };
}

const rows = [];
for (const name of ['cl100k_base', 'o200k_base']) {
  const { model, pattern, ranks } = await exportEncoding(name, '.');
  const s = JSON.parse(sluiceRun(['tokenize', '--tiktoken', model, '--pattern-file', pattern, '--file', 'bench.txt', '--bench', '5']));
  const sluiceIds = sluiceRun(['tokenize', '--tiktoken', model, '--pattern-file', pattern, '--file', 'bench.txt']).trim();
  rows.push([name, 'sluice', s.mb_per_s, s.tokens, 'reference']);

  const js = new Tiktoken(ranks);
  js.encode(text.slice(0, 100000), [], []);  // warm up the JIT
  const j = timeIt(() => js.encode(text, [], []), 2);
  const same = j.out.join(' ') === sluiceIds;
  rows.push([name, 'js-tiktoken 1.0.21', bytes / j.best / 1e6, j.out.length, same ? 'identical ids' : 'IDS DIFFER']);

  const gpt = await import(`gpt-tokenizer/encoding/${name}`);
  const plain = { allowedSpecial: new Set(), disallowedSpecial: new Set() };
  gpt.encode(text.slice(0, 100000), plain);
  const g = timeIt(() => gpt.encode(text, plain), 3);
  const gsame = g.out.join(' ') === sluiceIds;
  rows.push([name, 'gpt-tokenizer 4.0.0', bytes / g.best / 1e6, g.out.length, gsame ? 'identical ids' : 'ids differ']);

  if (name === 'o200k_base') {
    // K3's pre-tokenizer pattern on a 200k vocabulary: the cost of K3's split rule
    // at K3's vocabulary scale (the real K3 vocabulary is not in the repository).
    const k = JSON.parse(sluiceRun(['tokenize', '--tiktoken', model, '--safety-splits', '--file', 'bench.txt', '--bench', '5']));
    rows.push(['K3 pattern + splits, o200k ranks', 'sluice', k.mb_per_s, k.tokens, '']);
  }
}

console.log('\n| vocabulary | implementation | encode MB/s | tokens | vs sluice |');
console.log('|---|---|---:|---:|---|');
for (const [v, impl, mbs, tokens, note] of rows) console.log(`| ${v} | ${impl} | ${mbs.toFixed(2)} | ${tokens} | ${note} |`);
