// Parity test: sluice's tokenizer against js-tiktoken (an independent tiktoken
// implementation from npm) on cl100k_base and o200k_base.
//
//   node parity.mjs <path to build/sluice>      (run from the npm install folder)
//
// Generates a seeded corpus (corpus.mjs), encodes it with both implementations
// and requires identical ids; decodes sluice's ids with both and requires the
// original strings back. Any difference fails the test (exit 1).
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { Tiktoken } from 'js-tiktoken/lite';
import { makeCorpus } from './corpus.mjs';
import { exportEncoding } from './export.mjs';

const SEED = 20260817;
const COUNT = 12000;
const sluice = process.argv[2];
if (!sluice) { console.error('usage: node parity.mjs <sluice binary>'); process.exit(2); }

function run(args) {
  const r = spawnSync(sluice, args, { maxBuffer: 1 << 30, encoding: 'utf8' });
  if (r.status !== 0) {
    console.error(`FAIL: ${sluice} ${args.join(' ')} exited ${r.status}${r.signal ? ` (${r.signal})` : ''}\n${r.stderr}`);
    process.exit(1);
  }
  return r.stdout;
}

const t0 = Date.now();
const corpus = makeCorpus(SEED, COUNT);
writeFileSync('corpus.jsonl', corpus.map((s) => JSON.stringify(s)).join('\n') + '\n');
const chars = corpus.reduce((n, s) => n + s.length, 0);
const has = (re) => corpus.filter((s) => re.test(s)).length;
console.log(`corpus: ${corpus.length} strings, ${chars} UTF-16 units; with Han ${has(/\p{Script=Han}/u)}, ` +
  `emoji ${has(/\p{Extended_Pictographic}/u)}, 100+ space runs ${has(/ {100}/)}, ` +
  `upper-case contractions ${has(/'(S|T|RE|VE|M|LL|D)\b/)}, digits ${has(/\d{4}/)}`);

let failed = false;
for (const name of ['cl100k_base', 'o200k_base']) {
  const { model, pattern, ranks, size } = await exportEncoding(name, '.');
  const js = new Tiktoken(ranks);
  const ta = Date.now();
  const expected = corpus.map((s) => js.encode(s, [], []));
  const tb = Date.now();
  const idsText = run(['tokenize', '--tiktoken', model, '--pattern-file', pattern, '--lines', 'corpus.jsonl']);
  const tc = Date.now();
  const got = idsText.split('\n');
  let mismatches = 0, tokens = 0;
  for (let i = 0; i < corpus.length; i++) {
    const exp = expected[i].join(' ');
    tokens += expected[i].length;
    if (got[i] !== exp) {
      if (mismatches < 5)
        console.error(`FAIL ${name} #${i}: ${JSON.stringify(corpus[i]).slice(0, 300)}\n  js-tiktoken: ${exp.slice(0, 300)}\n  sluice:      ${(got[i] ?? '<missing>').slice(0, 300)}`);
      mismatches++;
    }
  }
  // Round trips: sluice decodes its ids back to the input, and so does js-tiktoken.
  writeFileSync(`${name}.ids`, got.slice(0, corpus.length).join('\n') + '\n');
  const decoded = run(['detokenize', '--tiktoken', model, '--lines', `${name}.ids`]).split('\n');
  let bad_round_trips = 0;
  for (let i = 0; i < corpus.length; i++) {
    const ok_sluice = JSON.parse(decoded[i]) === corpus[i];
    const ok_js = js.decode(expected[i]) === corpus[i];
    if (!ok_sluice || !ok_js) {
      if (bad_round_trips < 5)
        console.error(`FAIL ${name} round trip #${i} (sluice ${ok_sluice}, js ${ok_js}): ${JSON.stringify(corpus[i]).slice(0, 200)}`);
      bad_round_trips++;
    }
  }
  console.log(`${name}: ${size} ranks, ${tokens} tokens, ${mismatches} id mismatches, ` +
    `${bad_round_trips} bad round trips (js-tiktoken ${tb - ta} ms, sluice ${tc - tb} ms incl. load)`);
  if (mismatches || bad_round_trips) failed = true;
}
console.log(`total ${Date.now() - t0} ms`);
if (failed) { console.error('FAIL: sluice and js-tiktoken disagree'); process.exit(1); }
console.log('PASS');
