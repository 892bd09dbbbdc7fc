// Shared pieces of the `sluice serve` end-to-end tests: starting a server on a
// free loopback port, raw HTTP requests, `sluice run`, and bounded waiting.
import { spawn, execFile } from 'node:child_process';

export const BIN = process.env.SLUICE_BINARY;
export const MODEL = process.env.SLUICE_MODEL;
if (!BIN || !MODEL) throw new Error('set SLUICE_BINARY and SLUICE_MODEL (tests/serve/run.sh does)');

export const MODEL_ID = 'model'; // the fixture directory's name
// A sanitizer build (tests/serve/run.sh sets it): its shadow memory is outside any
// budget, so tests of memory bounds are the release build's.
export const SANITIZED = process.env.SLUICE_SANITIZED === '1';

export function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Polls cond() every 50 ms until it returns a truthy value; fails after ms.
export async function waitFor(cond, ms, what) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(50);
  }
}

// Starts `sluice serve --port 0` and resolves once it printed its port. One
// generation at a time (--parallel 1) unless args say otherwise or
// opts.defaultParallel (no --parallel: the server's default for its budget);
// the fixture model unless args name one; opts.env: more environment variables.
export async function startServer(args = [], opts = {}) {
  const parallel = args.includes('--parallel') || opts.defaultParallel ? [] : ['--parallel', '1'];
  const model = args.includes('--model') || args.includes('-m') ? [] : ['--model', MODEL];
  const host = args.includes('--host') ? [] : ['--host', '127.0.0.1'];
  const proc = spawn(BIN, ['serve', ...model, ...host, '--port', '0', ...parallel, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...opts.env },
  });
  let stderr = '';
  proc.stderr.on('data', (d) => {
    stderr += d;
  });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  const port = await withTimeout(
    new Promise((resolve, reject) => {
      let out = '';
      proc.stdout.on('data', (d) => {
        out += d;
        const m = out.match(/listening on http:\/\/[^:/]+:(\d+)\/v1/);
        if (m) resolve(Number(m[1]));
      });
      exited.then(({ code, signal }) => reject(new Error(`server exited (${code ?? signal}) before listening:\n${stderr}`)));
    }),
    60000,
    'sluice serve to start',
  ).catch((e) => {
    proc.kill('SIGKILL');
    throw e;
  });
  const url = `http://127.0.0.1:${port}`;
  return {
    proc,
    port,
    url,
    baseURL: `${url}/v1`,
    exited,
    stderr: () => stderr,
    // SIGTERM, then the exit status (bounded).
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      return withTimeout(exited, 30000, 'sluice serve to exit after SIGTERM');
    },
  };
}

// A raw POST; resolves to {status, headers, body (parsed JSON or text)}.
export async function post(srv, path, body, headers = {}) {
  const res = await fetch(srv.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed = text;
  try {
    parsed = JSON.parse(text);
  } catch {}
  return { status: res.status, headers: res.headers, body: parsed };
}

export async function health(srv) {
  return (await fetch(srv.url + '/health')).json();
}

// `sluice run --tokens ... --max-new N --ids`: the greedy ids.
export function runIds(tokens, maxNew) {
  return new Promise((resolve, reject) => {
    execFile(
      BIN,
      ['run', '--model', MODEL, '--tokens', tokens.join(','), '--max-new', String(maxNew), '--ids'],
      { timeout: 120000 },
      (err, stdout, stderr) => {
        if (err) return reject(new Error(`sluice run failed: ${err.message}\n${stderr}`));
        resolve(stdout.trim().split(/\s+/).map(Number));
      },
    );
  });
}

// Checks the OpenAI error shape and returns the error object.
export function openaiError(body) {
  if (typeof body !== 'object' || body === null || typeof body.error !== 'object')
    throw new Error(`not an OpenAI error body: ${JSON.stringify(body)}`);
  const e = body.error;
  for (const k of ['message', 'type', 'param', 'code'])
    if (!(k in e)) throw new Error(`error body lacks '${k}': ${JSON.stringify(body)}`);
  if (typeof e.message !== 'string' || e.message.length === 0) throw new Error('error message is empty');
  return e;
}

// Reads an SSE response body and returns the parsed `data:` payloads ('[DONE]' kept as a string).
export async function readSSE(res) {
  const text = await res.text();
  return text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6))
    .map((d) => (d === '[DONE]' ? d : JSON.parse(d)));
}
