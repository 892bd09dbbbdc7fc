// `sluice run` as a command: text streamed to stdout, seeded sampling, --stop,
// --stats on stderr, a chat turn from piped stdin, and Ctrl-C (SIGINT) stopping
// a generation cleanly.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { BIN, MODEL, withTimeout } from './helpers.mjs';

function run(args, input) {
  return new Promise((resolve, reject) => {
    const child = execFile(BIN, ['run', '--model', MODEL, ...args], { timeout: 120000 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') return reject(err);
      resolve({ code: err ? err.code : 0, stdout, stderr });
    });
    if (input !== undefined) child.stdin.end(input);
  });
}

test('--prompt streams text; the same seed gives the same text; --stop cuts it', async () => {
  const args = ['--prompt', 'Once upon a time', '--max-new', '40', '--temperature', '0.9', '--seed', '5'];
  const a = await run(args);
  const b = await run(args);
  assert.equal(a.code, 0, a.stderr);
  assert.equal(a.stdout, b.stdout);
  assert.ok(a.stdout.length > 1);
  const c = await run([...args.slice(0, -1), '6']);
  assert.notEqual(c.stdout, a.stdout);

  const text = a.stdout.replace(/\n$/, '');
  let at = Math.floor(text.length / 2);
  while (at + 2 <= text.length && /[\u0000\uFFFD\uD800-\uDFFF]/.test(text.slice(at, at + 2))) at++;
  assert.ok(at + 2 <= text.length, `no plain text to stop on in ${JSON.stringify(text)}`);
  const stop = text.slice(at, at + 2);
  const s = await run([...args, `--stop=${stop}`]);
  assert.equal(s.code, 0, s.stderr);
  assert.equal(s.stdout, text.slice(0, text.indexOf(stop)) + '\n');
});

test('--stats: a summary line and the expert source JSON on stderr, nothing extra on stdout', async () => {
  const r = await run(['--tokens', '448,259,309', '--max-new', '5', '--ids', '--stats']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^\d+( \d+){4}\n$/);
  assert.match(r.stderr, /prompt 3 tokens .* generated 5 tokens/);
  assert.match(r.stderr, /"expert_source"/);
});

test('a chat turn from piped stdin', async () => {
  const r = await run(['--reasoning-effort', 'none', '--max-new', '6', '--temperature', '0'], 'Hello there\n');
  assert.equal(r.code, 0, r.stderr);
  const again = await run(['--chat', 'Hello there', '--reasoning-effort', 'none', '--max-new', '6', '--temperature', '0']);
  assert.equal(r.stdout, again.stdout);
});

test('SIGINT stops the generation cleanly: partial output, exit 130', async () => {
  const child = spawn(BIN, ['run', '--model', MODEL, '--tokens', '448,259,309', '--max-new', '1000000'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '', stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise((r) => child.on('exit', (code, signal) => r({ code, signal })));
  await withTimeout(new Promise((r) => child.stdout.once('data', (d) => {
    stdout += d;
    r();
  })), 60000, 'first output');
  child.stdout.on('data', (d) => (stdout += d));
  child.kill('SIGINT');
  const { code, signal } = await withTimeout(exited, 30000, 'exit after SIGINT');
  assert.equal(signal, null);
  assert.equal(code, 130);
  assert.match(stderr, /stopped/);
  assert.ok(stdout.endsWith('\n'));
});
