/**
 * `batches`: create one over a whole bucket, a key prefix or listed objects, submit it, and follow it with a
 * live progress bar and ETA until it ends.
 */
import type { Command } from 'commander';
import type { components } from '../../generated/openapi.js';
import { CliError } from './errors.js';
import { call, clientCommand, clientOf, list, namespaceOf, type ClientOptions } from './context.js';
import { emit, formatDuration, note, printFields, printJson, printTable, shortTime } from './output.js';
import { Progress } from './progress.js';

type Batch = components['schemas']['Batch'];

const TERMINAL = new Set(['COMPLETED', 'COMPLETED_WITH_ERRORS', 'FAILED', 'CANCELED']);
/** object_ids a request carries at most (the API's maxItems). */
const IDS_PER_REQUEST = 10_000;

function path(o: ClientOptions, bucket: string) {
  return { header: { 'X-Namespace': namespaceOf(o) }, path: { bucket_identifier: bucket } };
}

/** A DRAFT batch of `objectIds` (sent 10,000 per request) and/or every object under `prefix`. */
export async function createBatch(o: ClientOptions, bucket: string, selection: { objectIds?: readonly string[]; prefix?: string }): Promise<Batch> {
  const client = clientOf(o);
  const ids = selection.objectIds ?? [];
  let batch = await call(
    o,
    client.POST('/v1/buckets/{bucket_identifier}/batches', {
      params: path(o, bucket),
      body: { ...(ids.length ? { object_ids: ids.slice(0, IDS_PER_REQUEST) } : {}), ...(selection.prefix !== undefined ? { prefix: selection.prefix } : {}) },
    }),
  );
  for (let i = IDS_PER_REQUEST; i < ids.length; i += IDS_PER_REQUEST) {
    batch = await call(
      o,
      client.POST('/v1/buckets/{bucket_identifier}/batches/{batch_id}/objects', {
        params: { ...path(o, bucket), path: { bucket_identifier: bucket, batch_id: batch.batch_id } },
        body: { object_ids: ids.slice(i, i + IDS_PER_REQUEST) },
      }),
    );
  }
  return batch;
}

export async function submitBatch(o: ClientOptions, bucket: string, batchId: string): Promise<Batch> {
  try {
    return await call(
      o,
      clientOf(o).POST('/v1/buckets/{bucket_identifier}/batches/{batch_id}/submit', {
        params: { ...path(o, bucket), path: { bucket_identifier: bucket, batch_id: batchId } },
      }),
    );
  } catch (err) {
    if (err instanceof CliError && err.message.startsWith('409') && /No enabled collection/i.test(err.message)) {
      // The batch stays a DRAFT: once a collection reads the bucket, submitting it processes exactly these objects.
      throw new CliError(
        err.message,
        `Create a collection that reads bucket '${bucket}' first: tessera collections create <name> --bucket ${bucket} --extractor text_extractor\n` +
          `  then submit this batch (kept as a DRAFT): tessera batches submit ${batchId} --bucket ${bucket}`,
        err.body,
      );
    }
    throw err;
  }
}

function progressDetail(b: Batch): string {
  const p = b.progress;
  // Nothing counted yet (DRAFT, or submitted and not started): the status says it all.
  if (p.records_total === 0) return [b.status, p.status_message].filter(Boolean).join('  ');
  const parts = [`${p.records_done}/${p.records_total} records`, `${p.documents_written} docs`];
  if (p.records_failed) parts.push(`${p.records_failed} failed`);
  if (typeof p.rate_per_second === 'number') parts.push(`${p.rate_per_second.toFixed(1)}/s`);
  if (!TERMINAL.has(b.status)) parts.push(`ETA ${formatDuration(p.eta_seconds)}`);
  parts.push(b.status);
  if (p.status_message) parts.push(p.status_message);
  return parts.join('  ');
}

/** Polls the batch until it ends, drawing its progress; the final batch. */
export async function followBatch(o: ClientOptions, bucket: string, batchId: string, intervalMs = process.stderr.isTTY ? 500 : 2000): Promise<Batch> {
  const client = clientOf(o);
  const bar = new Progress(`batch ${batchId}`);
  for (;;) {
    const batch = await call(
      o,
      client.GET('/v1/buckets/{bucket_identifier}/batches/{batch_id}', {
        params: { ...path(o, bucket), path: { bucket_identifier: bucket, batch_id: batchId } },
      }),
    );
    const state = { done: batch.progress.records_done, total: Math.max(batch.progress.records_total, 1), detail: progressDetail(batch) };
    if (TERMINAL.has(batch.status)) {
      bar.finish(batch.status === 'COMPLETED' ? { ...state, done: state.total } : state);
      return batch;
    }
    bar.update(state);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** The end of a followed batch: a summary (or the batch as JSON), its first errors, and a failing exit code unless COMPLETED. */
export function reportBatch(o: ClientOptions, batch: Batch): void {
  if (o.json) printJson(batch);
  else {
    const p = batch.progress;
    const seconds = p.started_at ? (Date.parse(batch.updated_at) - Date.parse(p.started_at)) / 1000 : null;
    printFields({}, [
      ['batch', batch.batch_id],
      ['status', batch.status],
      ['records', `${p.records_done}/${p.records_total} done, ${p.records_failed ?? 0} failed, ${p.records_skipped ?? 0} skipped`],
      ['documents', p.documents_written],
      ['took', formatDuration(seconds)],
    ]);
  }
  const errors = batch.tier_tasks.flatMap((t) => t.errors ?? []);
  for (const error of errors.slice(0, 5)) {
    note(`error: ${error.message}${error.collection_name ? ` (collection ${error.collection_name})` : ''}${error.recovery_suggestion ? `; ${error.recovery_suggestion}` : ''}`);
  }
  if (batch.status !== 'COMPLETED') process.exitCode = 1;
}

export function registerBatches(program: Command): void {
  const batches = program.command('batches').description('Batches: process a bucket’s objects through every collection that reads it');
  clientCommand(batches, 'create', 'Create a batch over the whole bucket, a key prefix, or listed objects')
    .requiredOption('--bucket <bucket>', 'the bucket (name or id)')
    .option('--prefix <prefix>', 'every object whose key starts with this')
    .option('--object-ids <list>', 'comma-separated object ids', list)
    .option('--submit', 'submit it at once')
    .option('--follow', 'submit it and follow it to the end with a progress bar')
    .addHelpText('after', '\nWithout --prefix or --object-ids the batch holds every object of the bucket.')
    .action(async (o: ClientOptions & { bucket: string; prefix?: string; objectIds?: string[]; submit?: boolean; follow?: boolean }) => {
      const selection = o.prefix === undefined && !o.objectIds ? { prefix: '' } : { ...(o.prefix !== undefined ? { prefix: o.prefix } : {}), ...(o.objectIds ? { objectIds: o.objectIds } : {}) };
      let batch = await createBatch(o, o.bucket, selection);
      if (!o.submit && !o.follow) return emit(o, batch, printBatch);
      if (!o.json) note(`created batch ${batch.batch_id} with ${batch.object_ids.length} object(s)`);
      batch = await submitBatch(o, o.bucket, batch.batch_id);
      if (!o.follow) return emit(o, batch, printBatch);
      reportBatch(o, await followBatch(o, o.bucket, batch.batch_id));
    });
  clientCommand(batches, 'submit', 'Submit a DRAFT batch')
    .argument('<batch_id>')
    .requiredOption('--bucket <bucket>')
    .option('--follow', 'follow it to the end with a progress bar')
    .action(async (batchId: string, o: ClientOptions & { bucket: string; follow?: boolean }) => {
      const batch = await submitBatch(o, o.bucket, batchId);
      if (!o.follow) return emit(o, batch, printBatch);
      reportBatch(o, await followBatch(o, o.bucket, batchId));
    });
  clientCommand(batches, 'follow', 'Follow a batch to the end with a live progress bar and ETA')
    .argument('<batch_id>')
    .requiredOption('--bucket <bucket>')
    .action(async (batchId: string, o: ClientOptions & { bucket: string }) => {
      reportBatch(o, await followBatch(o, o.bucket, batchId));
    });
  clientCommand(batches, 'get', 'Show one batch and its progress')
    .argument('<batch_id>')
    .requiredOption('--bucket <bucket>')
    .action(async (batchId: string, o: ClientOptions & { bucket: string }) => {
      const batch = await call(
        o,
        clientOf(o).GET('/v1/buckets/{bucket_identifier}/batches/{batch_id}', {
          params: { ...path(o, o.bucket), path: { bucket_identifier: o.bucket, batch_id: batchId } },
        }),
      );
      emit(o, batch, printBatch);
    });
  clientCommand(batches, 'list', 'List a bucket’s batches, newest first')
    .requiredOption('--bucket <bucket>')
    .option('--status <status>', 'only batches in this status (DRAFT, PENDING, IN_PROGRESS, COMPLETED, ...)')
    .option('--limit <n>', 'at most this many', (v) => Number(v))
    .action(async (o: ClientOptions & { bucket: string; status?: string; limit?: number }) => {
      const page = await call(
        o,
        clientOf(o).GET('/v1/buckets/{bucket_identifier}/batches', {
          params: { ...path(o, o.bucket), query: { ...(o.status ? { status: o.status as never } : {}), ...(o.limit ? { limit: o.limit } : {}) } },
        }),
      );
      emit(o, page, (p) =>
        printTable(p.results, [
          { header: 'batch id', value: (b) => b.batch_id },
          { header: 'status', value: (b) => b.status },
          { header: 'objects', value: (b) => b.object_ids.length, right: true },
          { header: 'done', value: (b) => `${b.progress.percent.toFixed(0)}%`, right: true },
          { header: 'documents', value: (b) => b.progress.documents_written, right: true },
          { header: 'created', value: (b) => shortTime(b.created_at) },
        ]),
      );
    });
  for (const [verb, description] of [
    ['cancel', 'Cancel a running batch'],
    ['retry', 'Run the failed and unfinished records of a batch again'],
  ] as const) {
    clientCommand(batches, verb, description)
      .argument('<batch_id>')
      .requiredOption('--bucket <bucket>')
      .option('--follow', 'follow it to the end (retry)')
      .action(async (batchId: string, o: ClientOptions & { bucket: string; follow?: boolean }) => {
        const params = { ...path(o, o.bucket), path: { bucket_identifier: o.bucket, batch_id: batchId } };
        const client = clientOf(o);
        const batch = await call(
          o,
          verb === 'cancel'
            ? client.POST('/v1/buckets/{bucket_identifier}/batches/{batch_id}/cancel', { params })
            : client.POST('/v1/buckets/{bucket_identifier}/batches/{batch_id}/retry', { params }),
        );
        if (verb === 'retry' && o.follow) return reportBatch(o, await followBatch(o, o.bucket, batchId));
        emit(o, batch, printBatch);
      });
  }
}

function printBatch(b: Batch): void {
  printFields({}, [
    ['batch_id', b.batch_id],
    ['status', b.status],
    ['objects', b.object_ids.length],
    ['collections', (b.collection_ids ?? []).join(', ')],
    ['progress', progressDetail(b)],
    ['created', shortTime(b.created_at)],
  ]);
}
