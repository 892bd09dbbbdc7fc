// Writes js-tiktoken's bundled vocabularies in tiktoken.model format
// (`<base64 bytes> <rank>` per line) plus their split patterns, for sluice to load.
import { writeFileSync } from 'node:fs';

export async function exportEncoding(name, dir) {
  const ranks = (await import(`js-tiktoken/ranks/${name}`)).default;
  // js-tiktoken's compressed form: lines of "<ignored> <first rank> <b64> <b64> ...".
  const byRank = [];
  for (const line of ranks.bpe_ranks.split('\n')) {
    if (!line) continue;
    const [, offset, ...tokens] = line.split(' ');
    tokens.forEach((t, i) => { byRank[Number(offset) + i] = t; });
  }
  const lines = [];
  for (let r = 0; r < byRank.length; r++) {
    if (byRank[r] === undefined) throw new Error(`${name}: rank ${r} missing`);
    lines.push(`${byRank[r]} ${r}`);
  }
  const model = `${dir}/${name}.tiktoken`, pattern = `${dir}/${name}.pattern`;
  writeFileSync(model, lines.join('\n') + '\n');
  writeFileSync(pattern, ranks.pat_str);
  return { model, pattern, ranks, size: byRank.length };
}
