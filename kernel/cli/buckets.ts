/** `buckets`, `objects` and `upload`: the buckets of a namespace, their objects, and files put into them. */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import type { TesseraClient } from '../../generated/client.js';
import { CliError, messageOfBody } from './errors.js';
import { call, clientCommand, clientOf, jsonFlag, namespaceOf, type ClientOptions } from './context.js';
import { emit, formatBytes, printFields, printTable, shortTime } from './output.js';

export function registerBuckets(program: Command): void {
  const buckets = program.command('buckets').description('Buckets of a namespace (--namespace or TESSERA_NAMESPACE)');
  clientCommand(buckets, 'list', 'List buckets').action(async (o: ClientOptions) => {
    const page = await call(o, clientOf(o).GET('/v1/buckets', { params: { header: { 'X-Namespace': namespaceOf(o) } } }));
    emit(o, page, (p) =>
      printTable(p.results, [
        { header: 'name', value: (b) => b.bucket_name },
        { header: 'id', value: (b) => b.bucket_id },
        { header: 'objects', value: (b) => b.object_count, right: true },
        { header: 'size', value: (b) => formatBytes(b.total_size_bytes), right: true },
        { header: 'created', value: (b) => shortTime(b.created_at) },
      ], `${p.total} bucket(s)`),
    );
  });
  clientCommand(buckets, 'get', 'Show one bucket')
    .argument('<bucket>', 'name or bkt_ id')
    .action(async (bucket: string, o: ClientOptions) => {
      const found = await call(
        o,
        clientOf(o).GET('/v1/buckets/{bucket_identifier}', { params: { header: { 'X-Namespace': namespaceOf(o) }, path: { bucket_identifier: bucket } } }),
      );
      emit(o, found, (b) =>
        printFields(b, ['bucket_name', 'bucket_id', 'description', 'object_count', ['total_size', formatBytes(b.total_size_bytes)], 'schema', 'created_at']),
      );
    });
  clientCommand(buckets, 'create', 'Create a bucket')
    .argument('<name>')
    .option('--schema <json>', 'schema as JSON, e.g. {"properties":{"title":{"type":"string"}}}', jsonFlag('--schema'))
    .action(async (name: string, o: ClientOptions & { schema?: never }) => {
      const created = await call(
        o,
        clientOf(o).POST('/v1/buckets', {
          params: { header: { 'X-Namespace': namespaceOf(o) } },
          body: { bucket_name: name, ...(o.schema ? { schema: o.schema } : {}) },
        }),
      );
      emit(o, created, (b) => printFields(b, ['bucket_name', 'bucket_id', 'schema', 'created_at']));
    });

  clientCommand(program, 'objects', 'List the objects of a bucket')
    .argument('<bucket>')
    .option('--prefix <prefix>')
    .option('--limit <n>', 'at most this many', (v) => Number(v))
    .option('--cursor <cursor>', 'the next page (from the previous page)')
    .action(async (bucket: string, o: ClientOptions & { prefix?: string; limit?: number; cursor?: string }) => {
      const page = await call(
        o,
        clientOf(o).GET('/v1/buckets/{bucket_identifier}/objects', {
          params: {
            header: { 'X-Namespace': namespaceOf(o) },
            path: { bucket_identifier: bucket },
            query: { ...(o.prefix ? { prefix: o.prefix } : {}), ...(o.limit ? { limit: o.limit } : {}), ...(o.cursor ? { cursor: o.cursor } : {}) },
          },
        }),
      );
      emit(o, page, (p) =>
        printTable(p.results, [
          { header: 'key', value: (x) => x.key },
          { header: 'object id', value: (x) => x.object_id },
          { header: 'size', value: (x) => formatBytes(x.size_bytes), right: true },
          { header: 'metadata', value: (x) => (Object.keys(x.metadata).length ? x.metadata : '') },
          { header: 'created', value: (x) => shortTime(x.created_at) },
        ], p.has_next ? `more: --cursor ${p.next_cursor}` : undefined),
      );
    });

  clientCommand(program, 'upload', 'Upload a file into a bucket (presigned PUT, streamed) and confirm it')
    .argument('<bucket>')
    .argument('<file>')
    .option('--property <name>', 'the blob property the file fills')
    .option('--object-key <key>', 'the object key (default: its id)')
    .option('--async', 'confirm in the background')
    .action(async (bucket: string, file: string, o: ClientOptions & { property?: string; objectKey?: string; async?: boolean }) => {
      const confirmed = await uploadFile(clientOf(o), o, bucket, file, {
        ...(o.property ? { property: o.property } : {}),
        ...(o.objectKey ? { key: o.objectKey } : {}),
        async: Boolean(o.async),
      });
      emit(o, confirmed, (c) => printFields(c, ['status', 'object_id', 'upload_id', 'file_size_bytes', 'message']));
    });
}

export interface UploadOptions {
  key?: string;
  property?: string;
  metadata?: Record<string, unknown>;
  async?: boolean;
  /** Called with each piece's size as the file streams out. */
  onBytes?: (bytes: number) => void;
}

/** Asks for an upload, PUTs the file to its presigned URL (streamed, never whole in memory) and confirms it. */
export async function uploadFile(client: TesseraClient, o: ClientOptions, bucket: string, file: string, options: UploadOptions) {
  const header = { 'X-Namespace': namespaceOf(o) };
  const size = (await stat(file)).size;
  const created = await call(
    o,
    client.POST('/v1/buckets/{bucket_identifier}/uploads', {
      params: { header, path: { bucket_identifier: bucket } },
      body: {
        filename: path.basename(file),
        ...(size > 0 ? { file_size_bytes: size } : {}),
        ...(options.property ? { property: options.property } : {}),
        ...(options.key ? { key: options.key } : {}),
        ...(options.metadata && Object.keys(options.metadata).length > 0 ? { metadata: options.metadata } : {}),
      },
    }),
  );
  const onBytes = options.onBytes;
  async function* counted() {
    for await (const piece of createReadStream(file)) {
      const chunk = piece as Buffer;
      onBytes?.(chunk.length);
      yield new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length);
    }
  }
  let put: Response;
  try {
    put = await fetch(created.presigned_url!, {
      method: 'PUT',
      headers: { ...created.headers, 'Content-Length': String(size) },
      body: ReadableStream.from(counted()),
      duplex: 'half',
    } as RequestInit);
  } catch (err) {
    throw new CliError(`uploading ${file} failed: ${(err as Error).message}`, 'Is the server still running? Try again.');
  }
  if (!put.ok) {
    const text = await put.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text) as unknown;
    } catch {
      // not JSON: the text itself
    }
    throw new CliError(`PUT ${file}: ${put.status} ${messageOfBody(body) ?? ''}`.trim(), undefined, body);
  }
  const etag = ((await put.json()) as { etag: string }).etag;
  return call(
    o,
    client.POST('/v1/buckets/{bucket_identifier}/uploads/{upload_id}/confirm', {
      params: { header, path: { bucket_identifier: bucket, upload_id: created.upload_id }, query: { async: Boolean(options.async) } },
      body: { etag, ...(size > 0 ? { file_size_bytes: size } : {}) },
    }),
  );
}
