/**
 * `tessera ingest ./folder --bucket b`: uploads a folder's files in parallel (object key = the file's path
 * relative to the folder, behind --prefix), with metadata from --metadata flags and a sidecar JSON per file,
 * then creates a batch over the uploaded objects, submits it and follows it to the end.
 *
 * Sidecar: `<file>.json` beside a file (photo.jpg → photo.jpg.json) is that file's metadata (a JSON object)
 * and is not uploaded itself; its fields override --metadata. Names starting with a dot are skipped.
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { createBatch, followBatch, reportBatch, submitBatch } from './batches.js';
import { uploadFile } from './buckets.js';
import { extractorConfigs } from './collections.js';
import { call, clientCommand, clientOf, collect, namespaceOf, pairsToObject, type ClientOptions } from './context.js';
import { CliError, messageOfBody, NAMESPACE_NOT_FOUND } from './errors.js';
import { formatBytes, note, printJson } from './output.js';
import { Progress, rateOf } from './progress.js';

export interface IngestFile {
  /** Absolute path on disk. */
  file: string;
  /** The object key: the path relative to the folder, with / separators, behind the prefix. */
  key: string;
  size: number;
  /** Path of its sidecar JSON, if it has one. */
  sidecar?: string;
}

/** Every file under `root` (depth first, names sorted), sidecars paired with the file they describe. */
export async function filesOf(root: string, prefix = ''): Promise<IngestFile[]> {
  const out: IngestFile[] = [];
  async function walk(dir: string): Promise<void> {
    const entries = (await readdir(dir, { withFileTypes: true })).filter((e) => !e.name.startsWith('.')).sort((a, b) => a.name.localeCompare(b.name));
    const names = new Set(entries.filter((e) => e.isFile()).map((e) => e.name));
    for (const entry of entries) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        await walk(full);
      } else if (entry.isFile()) {
        if (entry.name.endsWith('.json') && names.has(entry.name.slice(0, -'.json'.length))) continue; // a sidecar
        const sidecar = names.has(`${entry.name}.json`) ? path.join(dir, `${entry.name}.json`) : undefined;
        const relative = path.relative(root, full).split(path.sep).join('/');
        out.push({ file: full, key: `${prefix}${relative}`, size: (await stat(full)).size, ...(sidecar ? { sidecar } : {}) });
      }
    }
  }
  await walk(root);
  return out;
}

async function sidecarOf(file: IngestFile): Promise<Record<string, unknown>> {
  if (!file.sidecar) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(file.sidecar, 'utf8')) as unknown;
  } catch (err) {
    throw new CliError(`${file.sidecar} is not valid JSON: ${(err as Error).message}`, 'Fix it, or remove it to ingest the file without its metadata.');
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new CliError(`${file.sidecar} must hold a JSON object (the file's metadata)`);
  return parsed as Record<string, unknown>;
}

interface IngestOptions extends ClientOptions {
  bucket: string;
  collection?: string;
  extractor: string[];
  prefix?: string;
  metadata: string[];
  concurrency: number;
  follow: boolean;
}

export function registerIngest(program: Command): void {
  clientCommand(program, 'ingest', 'Upload a folder in parallel, then process it in a batch and follow it to the end')
    .argument('<folder>')
    .requiredOption('--bucket <bucket>', 'the bucket to fill (created if missing)')
    .option('--collection <collection>', 'the collection to process into (created if missing, reading the bucket)')
    .option('--extractor <name>', 'extractor(s) of a collection --collection creates (repeatable; default text_extractor)', collect, [])
    .option('--prefix <prefix>', 'put before every object key (e.g. 2026/)')
    .option('--metadata <key=value>', 'metadata for every object (repeatable; key:=json for a JSON value)', collect, [])
    .option('--concurrency <n>', 'files uploaded at once', (v) => Math.max(1, Number(v) || 1), 8)
    .option('--no-follow', 'submit the batch and return without following it')
    .addHelpText(
      'after',
      '\nObject keys are the files\' paths relative to <folder> (behind --prefix). A file\'s sidecar, <file>.json beside it\n' +
        '(photo.jpg.json for photo.jpg), is its metadata, merged over --metadata, and is not uploaded itself.',
    )
    .action(ingest);
}

async function ingest(folder: string, o: IngestOptions): Promise<void> {
  namespaceOf(o);
  const root = path.resolve(folder);
  const rootStat = await stat(root).catch(() => undefined);
  if (!rootStat?.isDirectory()) throw new CliError(`${folder} is not a folder`, 'Give the folder to upload: tessera ingest ./docs --bucket docs');
  const common = pairsToObject(o.metadata, '--metadata');
  const files = await filesOf(root, o.prefix ?? '');
  if (files.length === 0) throw new CliError(`${folder} holds no files to upload`);
  // Sidecars are read up front: a broken one stops the run before anything is uploaded.
  const metadata = new Map<string, Record<string, unknown>>();
  for (const file of files) metadata.set(file.file, { ...common, ...(await sidecarOf(file)) });

  const client = clientOf(o);
  const header = { 'X-Namespace': namespaceOf(o) };
  await ensureBucket(o, header);
  if (o.collection) await ensureCollection(o, header);

  const totalBytes = files.reduce((sum, f) => sum + f.size, 0);
  const bar = new Progress('upload');
  const startedAt = Date.now();
  let doneFiles = 0;
  let sentBytes = 0;
  const state = () => {
    const { perSecond } = rateOf(sentBytes, totalBytes, startedAt);
    const eta = perSecond > 0 ? (totalBytes - sentBytes) / perSecond : null;
    return {
      done: sentBytes,
      total: Math.max(totalBytes, 1),
      detail: `${doneFiles}/${files.length} files  ${formatBytes(sentBytes)}/${formatBytes(totalBytes)}  ${formatBytes(perSecond)}/s${eta !== null && doneFiles < files.length ? `  ETA ${Math.ceil(eta)}s` : ''}`,
    };
  };
  const objectIds: string[] = [];
  const failures: Array<{ key: string; message: string }> = [];
  let next = 0;
  const worker = async () => {
    while (next < files.length) {
      const file = files[next++]!;
      try {
        const confirmed = await uploadFile(client, o, o.bucket, file.file, {
          key: file.key,
          metadata: metadata.get(file.file)!,
          onBytes: (bytes) => {
            sentBytes += bytes;
            bar.update(state());
          },
        });
        if (confirmed.object_id) objectIds.push(confirmed.object_id);
      } catch (err) {
        // The server being gone ends the run; a file the server refuses is reported and the rest go on.
        if (err instanceof CliError && /cannot reach|request to .* failed/.test(err.message)) throw err;
        failures.push({ key: file.key, message: err instanceof Error ? err.message : String(err) });
      }
      doneFiles++;
      bar.update(state());
    }
  };
  await Promise.all(Array.from({ length: Math.min(o.concurrency, files.length) }, worker));
  bar.finish(state());
  for (const f of failures.slice(0, 10)) note(`failed: ${f.key}: ${f.message}`);
  if (failures.length > 10) note(`... and ${failures.length - 10} more failed`);
  const seconds = (Date.now() - startedAt) / 1000;
  if (!o.json) note(`uploaded ${objectIds.length} file(s), ${formatBytes(totalBytes)} in ${seconds.toFixed(1)}s${failures.length ? `; ${failures.length} failed` : ''}`);
  if (objectIds.length === 0) throw new CliError('no file was uploaded, so no batch was created', failures[0]?.message.includes('409') ? 'Those keys are already in the bucket: use another --prefix, or delete the objects first.' : undefined);

  const created = await createBatch(o, o.bucket, { objectIds });
  if (!o.json) note(`batch ${created.batch_id}: ${created.object_ids.length} object(s), submitting`);
  const submitted = await submitBatch(o, o.bucket, created.batch_id);
  if (!o.follow) {
    if (o.json) printJson(submitted);
    else process.stdout.write(`batch ${submitted.batch_id} ${submitted.status}; follow it with: tessera batches follow ${submitted.batch_id} --bucket ${o.bucket}\n`);
  } else {
    reportBatch(o, await followBatch(o, o.bucket, created.batch_id));
  }
  if (failures.length > 0) process.exitCode = 1;
}

async function ensureBucket(o: IngestOptions, header: { 'X-Namespace': string }): Promise<void> {
  const client = clientOf(o);
  const lookup = client.GET('/v1/buckets/{bucket_identifier}', { params: { header, path: { bucket_identifier: o.bucket } } });
  const found = await lookup.catch(() => undefined);
  if (found?.response.ok) return;
  if (found?.response.status === 404 && !NAMESPACE_NOT_FOUND.test(messageOfBody(found.error) ?? '')) {
    await call(o, client.POST('/v1/buckets', { params: { header }, body: { bucket_name: o.bucket } }));
    note(`created bucket ${o.bucket} (it did not exist)`);
    return;
  }
  // Unreachable, or refused for another reason: call says what to do.
  await call(o, lookup);
}

async function ensureCollection(o: IngestOptions, header: { 'X-Namespace': string }): Promise<void> {
  const client = clientOf(o);
  const found = await client.GET('/v1/collections/{collection_identifier}', { params: { header, path: { collection_identifier: o.collection! } } });
  if (found.response.ok) return;
  if (found.response.status !== 404) await call(o, Promise.resolve(found));
  const extractors = o.extractor.length ? o.extractor : ['text_extractor'];
  await call(
    o,
    client.POST('/v1/collections/create', {
      params: { header },
      body: { collection_name: o.collection!, source: { type: 'bucket', bucket_id: o.bucket }, feature_extractors: extractorConfigs(extractors, []) },
    }),
  );
  note(`created collection ${o.collection} reading bucket ${o.bucket} with ${extractors.join(', ')}`);
}
