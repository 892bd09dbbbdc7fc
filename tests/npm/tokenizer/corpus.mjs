// Deterministic corpus of varied strings for tokenizer parity tests and benchmarks.
//
// makeCorpus(seed, count) returns `count` strings built from random fragments:
// English words in every casing, contractions (also upper-case and with U+2019),
// digit runs and formatted numbers, code, punctuation runs, whitespace runs of up
// to 700 characters, many scripts (Han, kana, Hangul, Cyrillic, Greek,
// Arabic, Hebrew, Devanagari, Thai, accented Latin, combining marks), emoji
// (modifiers, ZWJ sequences, flags, keycaps), symbols, and special-token
// spellings (which must stay ordinary text).
//
// Characters whose class differs between the regex engines involved are left
// out on purpose: U+0085 and U+FEFF (JavaScript's \s disagrees with Unicode
// White_Space on both), U+180E, lone surrogates, and code points assigned after
// Unicode 14 (PCRE2 10.42's tables).

export function rng(seed) {
  let s = seed >>> 0 || 1;
  return () => {
    // xorshift32
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s / 4294967296;
  };
}

const WORDS = (
  'the of and to in is you that it he was for on are as with his they at be this have from or one had ' +
  'by word but not what all were we when your can said there use an each which she do how their if will ' +
  'up other about out many then them these so some her would make like him into time has look two more ' +
  'write go see number no way could people my than first water been call who oil its now find long down ' +
  'day did get come made may part tokenizer license software freedom program library kernel stream weights ' +
  'expert router attention mixture inference engine byte pair encoding merge rank unicode whitespace'
).split(' ');
const CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"];
const PUNCT = '!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~';
const UPUNCT = ['«', '»', '—', '–', '…', '‘', '’', '“', '”', '¿', '¡', '·', '•', '§', '¶', '†', '‰', '′', '″', '、', '。', '「', '」', '！', '？', '（', '）'];
const SYMBOLS = ['∑', '∫', '√', '≈', '≠', '≤', '≥', '±', '×', '÷', '€', '£', '¥', '₹', '°', '©', '®', '™', '→', '⇒', '∀', '∃', '∈', 'ℕ', 'ℝ', '½', '²', '³', '½', 'Ⅻ', '①'];
const SPACES = [' ', ' ', ' ', ' ', '\t', '\n', '\n', '\r\n', '\r', '\u00a0', '\u3000', '\u2003', '\u2009', '\u202f', '\u000b', '\u000c'];
const CODE = [
  'def f(x):\n    return x**2\n',
  'for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}',
  'if (a && b || !c) { x += y; } else { x -= 1; }',
  '<div class="row"><span id=\'x\'>text</span></div>',
  '{"key": [1, 2.5, -3e10, true, null], "nested": {"a": "b"}}',
  'SELECT id, name FROM users WHERE age >= 18 ORDER BY name;',
  'const re = /^[a-z0-9_\\-]+@([a-z]+\\.)+[a-z]{2,}$/i;',
  '/usr/lib/x86_64-linux-gnu/libpcre2-8.so.0',
  'https://example.com/path?query=1&lang=en#frag',
  'std::vector<std::pair<int, float>> v{{1, 2.0f}};',
  'fn main() -> Result<(), Box<dyn Error>> { Ok(()) }',
  '#include <stdio.h>\nint main(void) { printf("%d\\n", 42); }',
  '    self.assertEqual(camelCaseName, snake_case_name)  # comment',
  'x = [i ** 2 for i in range(10) if i % 3 == 0]',
  '$ ls -la | grep -v "^d" > out.txt 2>&1 && echo $?',
  'getHTTPResponseCode XMLHttpRequest IOError HTMLParser parseJSON',
];
const SPECIALS = ['<|endoftext|>', '<|fim_prefix|>', '<|endofprompt|>', '<|im_start|>', '[BOS]', '<|open|>'];
// [first, last] code point ranges of letters (and marks) per script.
const SCRIPTS = [
  [[0x4e00, 0x9fff]],                    // Han
  [[0x3041, 0x3096]],                    // Hiragana
  [[0x30a1, 0x30fa]],                    // Katakana
  [[0xac00, 0xd7a3]],                    // Hangul
  [[0x0410, 0x044f]],                    // Cyrillic
  [[0x0391, 0x03a1], [0x03a3, 0x03c9]],  // Greek
  [[0x0621, 0x064a]],                    // Arabic
  [[0x05d0, 0x05ea]],                    // Hebrew
  [[0x0905, 0x0939], [0x093e, 0x094c]],  // Devanagari letters + vowel signs
  [[0x0e01, 0x0e30], [0x0e31, 0x0e3a]],  // Thai letters + marks
  [[0x00c0, 0x00d6], [0x00d8, 0x00f6], [0x00f8, 0x017f]],  // accented Latin
  [[0x0531, 0x0556], [0x0561, 0x0586]],  // Armenian
  [[0x10d0, 0x10fa]],                    // Georgian
];
const EMOJI_RANGES = [[0x1f600, 0x1f64f], [0x1f300, 0x1f5ff], [0x1f680, 0x1f6c5], [0x1f900, 0x1f9ff]];

function pick(r, a) { return a[Math.floor(r() * a.length)]; }
function int(r, lo, hi) { return lo + Math.floor(r() * (hi - lo + 1)); }
function fromRanges(r, ranges) {
  const [a, b] = pick(r, ranges);
  return String.fromCodePoint(int(r, a, b));
}

function casing(r, w) {
  const k = r();
  if (k < 0.55) return w;
  if (k < 0.75) return w[0].toUpperCase() + w.slice(1);
  if (k < 0.9) return w.toUpperCase();
  return [...w].map((c) => (r() < 0.5 ? c.toUpperCase() : c)).join('');
}

const FRAGMENTS = [
  // words and sentences
  (r) => {
    const n = int(r, 1, 12);
    const out = [];
    for (let i = 0; i < n; i++) out.push(casing(r, pick(r, WORDS)));
    return out.join(' ') + (r() < 0.5 ? pick(r, ['.', ',', '!', '?', ';', ':', '']) : '');
  },
  // contractions, any casing, sometimes with a typographic apostrophe
  (r) => {
    let c = pick(r, CONTRACTIONS);
    if (r() < 0.4) c = c.toUpperCase();
    else if (r() < 0.3) c = [...c].map((x) => (r() < 0.5 ? x.toUpperCase() : x)).join('');
    if (r() < 0.15) c = c.replace("'", '\u2019');
    return casing(r, pick(r, WORDS)) + c + (r() < 0.3 ? pick(r, CONTRACTIONS) : '');
  },
  // digits
  (r) => {
    const k = r();
    if (k < 0.4) { let s = ''; const n = int(r, 1, 24); for (let i = 0; i < n; i++) s += int(r, 0, 9); return s; }
    if (k < 0.6) return `${int(r, 0, 99999)}.${int(r, 0, 9999)}`;
    if (k < 0.75) return `${int(r, 1, 999)},${String(int(r, 0, 999)).padStart(3, '0')},${String(int(r, 0, 999)).padStart(3, '0')}`;
    if (k < 0.85) return `0x${int(r, 0, 0x7fffffff).toString(16).toUpperCase()}`;
    return `${int(r, 1900, 2100)}-${String(int(r, 1, 12)).padStart(2, '0')}-${String(int(r, 1, 28)).padStart(2, '0')}`;
  },
  // whitespace runs (long ones too), mixed with newlines
  (r) => {
    const k = r();
    // js-tiktoken's merge is cubic in the piece length, so long runs are rationed
    // to keep the test fast: ~390 of 2..120 chars, ~90 of 120..400, ~9 of 500..700.
    if (k < 0.7) { let s = ''; const n = int(r, 1, 12); for (let i = 0; i < n; i++) s += pick(r, SPACES); return s; }
    if (k < 0.9) return '\n'.repeat(int(r, 2, 40)) + ' '.repeat(int(r, 0, 8));
    if (k < 0.965) return ' '.repeat(int(r, 2, 120));
    if (k < 0.98) return pick(r, [' ', ' ', '\t', '\n']).repeat(int(r, 120, 400));
    if (k < 0.9985) return pick(r, SPACES).repeat(int(r, 2, 60));
    return pick(r, [' ', '\t', '\n']).repeat(int(r, 500, 700));
  },
  // punctuation runs
  (r) => {
    let s = r() < 0.3 ? ' ' : '';
    const n = int(r, 1, 10);
    for (let i = 0; i < n; i++) s += r() < 0.75 ? PUNCT[int(r, 0, PUNCT.length - 1)] : pick(r, UPUNCT);
    return s + (r() < 0.2 ? '\n' : '');
  },
  // code
  (r) => pick(r, CODE),
  // identifiers
  (r) => {
    const parts = [];
    const n = int(r, 2, 4);
    for (let i = 0; i < n; i++) parts.push(pick(r, WORDS));
    const k = r();
    if (k < 0.33) return parts.join('_');
    if (k < 0.66) return parts[0] + parts.slice(1).map((w) => w[0].toUpperCase() + w.slice(1)).join('');
    return parts.map((w) => w.toUpperCase()).join('_');
  },
  // a run of one script, sometimes with spaces inside
  (r) => {
    const ranges = pick(r, SCRIPTS);
    let s = '';
    const n = int(r, 1, 30);
    for (let i = 0; i < n; i++) s += r() < 0.12 ? ' ' : fromRanges(r, ranges);
    return s;
  },
  // Latin with combining marks
  (r) => {
    let s = '';
    const n = int(r, 1, 8);
    for (let i = 0; i < n; i++) s += pick(r, 'aeiouncAEIOUNC'.split('')) + (r() < 0.6 ? String.fromCodePoint(int(r, 0x0300, 0x036f)) : '');
    return s;
  },
  // emoji
  (r) => {
    const k = r();
    let e = fromRanges(r, EMOJI_RANGES);
    if (k < 0.2) e += String.fromCodePoint(int(r, 0x1f3fb, 0x1f3ff));
    else if (k < 0.35) e = '\u{1f468}\u200d\u{1f469}\u200d\u{1f467}';
    else if (k < 0.45) e = String.fromCodePoint(int(r, 0x1f1e6, 0x1f1ff), int(r, 0x1f1e6, 0x1f1ff));
    else if (k < 0.55) e = `${int(r, 0, 9)}\ufe0f\u20e3`;
    else if (k < 0.65) e = '\u2764\ufe0f';
    return e.repeat(int(r, 1, 4));
  },
  // symbols
  (r) => { let s = ''; const n = int(r, 1, 6); for (let i = 0; i < n; i++) s += pick(r, SYMBOLS); return s; },
  // special-token spellings (ordinary text for the encoder)
  (r) => pick(r, SPECIALS),
  // random code points from a broad pool
  (r) => {
    let s = '';
    const n = int(r, 1, 20);
    const pools = [...SCRIPTS, EMOJI_RANGES, [[0x20, 0x7e]], [[0xa1, 0xff]], [[0x2000, 0x200a]], [[0x2010, 0x205e]]];
    for (let i = 0; i < n; i++) s += fromRanges(r, pick(r, pools));
    return s;
  },
];

const JOINERS = ['', ' ', ' ', ' ', '\n', '  ', '\t', ', ', '. ', '\n\n'];

export function makeString(r) {
  const n = int(r, 1, 12);
  let s = r() < 0.1 ? pick(r, SPACES) : '';
  for (let i = 0; i < n; i++) {
    s += pick(r, FRAGMENTS)(r);
    if (i + 1 < n) s += pick(r, JOINERS);
  }
  if (r() < 0.15) s += pick(r, SPACES).repeat(int(r, 1, 5));
  return s;
}

export function makeCorpus(seed, count) {
  const r = rng(seed);
  const out = [];
  for (let i = 0; i < count; i++) out.push(makeString(r));
  return out;
}

// Running text for benchmarks: mostly prose, with code and other scripts mixed in.
export function makeText(seed, bytes) {
  const r = rng(seed);
  const parts = [];
  let size = 0;
  const enc = new TextEncoder();
  while (size < bytes) {
    const k = r();
    let s;
    if (k < 0.7) s = FRAGMENTS[0](r) + pick(r, [' ', ' ', ' ', '\n', '\n\n']);
    else if (k < 0.78) s = FRAGMENTS[1](r) + ' ';
    else if (k < 0.84) s = FRAGMENTS[2](r) + ' ';
    else if (k < 0.9) s = pick(r, CODE) + '\n';
    else if (k < 0.95) s = FRAGMENTS[7](r) + ' ';
    else s = makeString(r) + '\n';
    parts.push(s);
    size += enc.encode(s).length;
  }
  return parts.join('');
}
