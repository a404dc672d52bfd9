/**
 * `tsx scripts/bench/uploads.ts [rounds]`: MB/s of upload + confirm through the API (presigned PUT to the
 * local blob store, then a sync confirm that creates the object) for 1 MB and 100 MB files, beside a plain
 * file copy of the same bytes on the same disk, in one run.
 */
import { createHash, randomBytes } from 'node:crypto';
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createReadStream } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { startKernel } from '../../kernel/app.js';
import { loadConfig } from '../../kernel/config.js';
import builtins from '../../plugins/index.js';

const rounds = Number(process.argv[2] ?? 3);
const home = await mkdtemp(path.join(os.tmpdir(), 'tessera-bench-uploads-'));
const adminKey = `svc_sk_bench_${'u'.repeat(47)}`;
const kernel = await startKernel({
  config: { ...loadConfig({}), home, port: 0, host: '127.0.0.1', adminKey, logLevel: 'silent' },
  plugins: builtins.map((plugin) => ({ plugin, origin: 'builtin' })),
  overrides: { logger: pino({ level: 'silent' }) },
});

async function call(method: string, route: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${kernel.url}${route}`, {
    method,
    headers: { Authorization: `Bearer ${adminKey}`, 'X-Namespace': 'bench', 'Content-Type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

function putFile(url: string, file: string, size: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const { port, pathname } = new URL(url);
    const req = http.request({ host: '127.0.0.1', port, path: pathname, method: 'PUT', headers: { 'Content-Length': size } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`PUT ${res.statusCode}`))));
    });
    req.on('error', reject);
    createReadStream(file).pipe(req);
  });
}

await call('POST', '/v1/namespaces', { namespace_name: 'bench' });
await call('POST', '/v1/buckets', { bucket_name: 'files' });

/** One upload + PUT + confirm; the first run of each route also builds its validator, so warm up first. */
async function uploadOnce(file: string, size: number, etag: string, name: string): Promise<void> {
  const upload = await call('POST', '/v1/buckets/files/uploads', { filename: name, file_size_bytes: size });
  await putFile(String(upload.presigned_url), file, size);
  const confirmed = await call('POST', `/v1/buckets/files/uploads/${String(upload.upload_id)}/confirm`, { etag, file_size_bytes: size });
  if (confirmed.status !== 'COMPLETED') throw new Error('confirm did not complete');
}
{
  const warm = path.join(home, 'warm.bin');
  const bytes = randomBytes(1024);
  await writeFile(warm, bytes);
  await uploadOnce(warm, bytes.length, createHash('md5').update(bytes).digest('hex'), 'warm.bin');
}

const rows: string[] = [];
for (const mb of [1, 100]) {
  const size = mb * 1024 * 1024;
  const source = path.join(home, `source-${mb}.bin`);
  const bytes = randomBytes(size);
  await writeFile(source, bytes);
  const etag = createHash('md5').update(bytes).digest('hex');
  let apiMs = 0;
  let copyMs = 0;
  for (let i = 0; i < rounds; i++) {
    let started = performance.now();
    await uploadOnce(source, size, etag, `f${mb}-${i}.bin`);
    apiMs += performance.now() - started;
    started = performance.now();
    await copyFile(source, path.join(home, `copy-${mb}-${i}.bin`));
    copyMs += performance.now() - started;
  }
  const apiRate = (mb * rounds) / (apiMs / 1000);
  const copyRate = (mb * rounds) / (copyMs / 1000);
  rows.push(
    `${String(mb).padStart(4)} MB   API upload+confirm ${apiRate.toFixed(1).padStart(8)} MB/s (${(apiMs / rounds).toFixed(1)} ms each)   ` +
      `file copy ${copyRate.toFixed(1).padStart(8)} MB/s   API/copy ${(apiRate / copyRate * 100).toFixed(0)}%`,
  );
}
process.stdout.write(`uploads through the API vs a plain file copy, ${rounds} rounds each, ${os.cpus().length} cores, node ${process.version}\n`);
process.stdout.write(`${rows.join('\n')}\n`);
await kernel.stop();
await rm(home, { recursive: true, force: true });
