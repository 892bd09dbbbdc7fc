// Drafting on vs off with `sluice run --stats`, same run, interleaved.
//   node bench/draft_ab.mjs SLUICE_BINARY MODEL_DIR [--rounds 3] [--max-new 100] [--ids]
//        [--variants suffix,none] [-- extra run flags, e.g. --ram-budget 4G --draft-max 8]
// Two prompts: "rep", a passage given twice and then its first words (the
// continuation quotes it: drafts from the prompt get accepted), and "free",
// the opening of a text. With --ids they are token ids (a model without a
// tokenizer, or with random weights). For each round, prompt and variant
// (--draft suffix, --draft none, or a flag set like "suffix:--draft-window=fixed"),
// one greedy run; prints one JSON line per run (decode tok/s, tokens per pass,
// draft acceptance, bytes read per generated token) and, per prompt and
// variant, the median over rounds with its ratio to the last variant (off).
import { spawnSync } from 'node:child_process';
import { benchArgs } from './bench_args.mjs';

const { bin, model, passed: runFlags, opt, has } = benchArgs(
  'usage: node bench/draft_ab.mjs SLUICE_BINARY MODEL_DIR [--rounds N] [--max-new N] [--ids] [--variants a,b] [-- run flags]');
const rounds = Number(opt('--rounds', '3'));
const maxNew = Number(opt('--max-new', '100'));
const ids = has('--ids');
const variants = opt('--variants', 'suffix,none').split(',');

const passage =
  'And God said, Let the waters under the heaven be gathered together unto one place, and let the dry land appear: and it was so.';
const prompts = ids
  ? (() => {
      const p = Array.from({ length: 40 }, (_, i) => 1000 + ((i * 7919) % 5000));
      return {
        rep: ['--tokens', [...p, ...p, ...p.slice(0, 3)].join(',')],
        free: ['--tokens', Array.from({ length: 8 }, (_, i) => 2000 + ((i * 104729) % 5000)).join(',')],
      };
    })()
  : { rep: ['--prompt', `${passage}\n${passage}\nAnd God said`], free: ['--prompt', 'In the beginning God created'] };

function once(name, variant) {
  const [draft, ...extra] = variant.split(':');
  const args = ['run', '--model', model, ...prompts[name], '--max-new', String(maxNew), '--ids', '--stats',
    '--draft', draft, ...extra.map((f) => f.replace('=', ' ').split(' ')).flat(), ...runFlags];
  const r = spawnSync(bin, args, { encoding: 'utf8', maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`${args.join(' ')}: exit ${r.status}\n${r.stderr}`);
  const lines = r.stderr.trim().split('\n');
  const stats = JSON.parse(lines[lines.length - 1]);
  const decode = Number((r.stderr.match(/decode ([\d.]+) tok\/s/) ?? [0, 0])[1]);
  return {
    prompt: name, variant, decode_tok_s: decode, tokens_per_pass: stats.tokens_per_pass,
    draft_acceptance: stats.draft_acceptance, bytes_per_token: stats.bytes_per_token, output: r.stdout.trim(),
  };
}

const all = [];
for (let round = 0; round < rounds; round++)
  for (const name of Object.keys(prompts))
    for (const v of round % 2 ? [...variants].reverse() : variants) {
      const rec = { round, ...once(name, v) };
      all.push(rec);
      const { output, ...shown } = rec;
      console.log(JSON.stringify(shown));
    }

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const off = variants[variants.length - 1];
for (const name of Object.keys(prompts)) {
  const of = (v) => all.filter((r) => r.prompt === name && r.variant === v);
  const base = median(of(off).map((r) => r.decode_tok_s));
  const baseTpp = median(of(off).map((r) => r.tokens_per_pass));
  const same = of(off)[0].output;
  for (const v of variants) {
    const rs = of(v);
    console.log(JSON.stringify({
      summary: name, variant: v, decode_tok_s: rs.map((r) => r.decode_tok_s),
      median_tok_s: median(rs.map((r) => r.decode_tok_s)), tok_s_vs_off: median(rs.map((r) => r.decode_tok_s)) / base,
      tokens_per_pass: median(rs.map((r) => r.tokens_per_pass)),
      tokens_per_pass_vs_off: median(rs.map((r) => r.tokens_per_pass)) / baseTpp,
      draft_acceptance: median(rs.map((r) => r.draft_acceptance)), bytes_per_token: median(rs.map((r) => r.bytes_per_token)),
      output_identical: rs.every((r) => r.output === same),
    }));
  }
}
