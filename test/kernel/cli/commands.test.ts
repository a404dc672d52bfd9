/**
 * The client commands through the real stack: a kernel on port 0 (with a text model worker, so batches
 * run), the built CLI (bin/tessera.js → dist/cli.js) as a child process. Tables by default, --json for
 * scripts, `ingest` of a folder with sidecar metadata ending in a completed batch, batches over a prefix,
 * retriever execution, and errors that say what to do.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HealthRegistry } from '../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';
import { bundle, bundleIsCurrent, cliBin, ensureBuiltCli } from './built.js';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI; resolves with its exit code and output whether it failed or not. */
function run(args: string[], env: Record<string, string | undefined>): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, [cliBin, ...args], { env: env as NodeJS.ProcessEnv, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** A port nothing listens on (taken, then released). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('tessera client commands', () => {
  let t: TestKernel;
  let folder: string;
  const base = () => {
    const env: Record<string, string | undefined> = { ...process.env, TESSERA_URL: t.url, TESSERA_API_KEY: t.adminKey, TESSERA_NAMESPACE: 'cli_docs' };
    delete env.LOG_LEVEL;
    return env;
  };
  const tessera = (args: string[], env: Record<string, string | undefined> = {}) => run(args, { ...base(), ...env });
  const ok = async (args: string[], env: Record<string, string | undefined> = {}) => {
    const result = await tessera(args, env);
    expect(result.code, `tessera ${args.join(' ')}\n${result.stderr}`).toBe(0);
    return result;
  };
  const json = async (args: string[]) => JSON.parse((await ok([...args, '--json'])).stdout);

  beforeAll(async () => {
    await ensureBuiltCli();
    t = await startTestKernel({
      inferencePlugins: [path.resolve(__dirname, '../../../plugins/models/hashed-ngram-text/index.ts')],
      config: { inferenceWorkers: 1, batchHealthIntervalMs: 0 },
    });
    expect((await t.client().POST('/v1/namespaces', { body: { namespace_name: 'cli_docs' } })).response.status).toBe(201);

    folder = await mkdtemp(path.join(os.tmpdir(), 'tessera-cli-ingest-'));
    await mkdir(path.join(folder, 'notes'));
    await writeFile(path.join(folder, 'lighthouse.txt'), 'Lighthouses guide ships along rocky coasts. Their lamps turn all night.\n');
    await writeFile(path.join(folder, 'lighthouse.txt.json'), JSON.stringify({ topic: 'sea', stars: 5 }));
    await writeFile(path.join(folder, 'notes', 'bread.txt'), 'Bread needs flour, water, salt and time.\n');
    await writeFile(path.join(folder, 'notes', 'glacier.txt'), 'Glaciers carve valleys over thousands of years.\n');
    await writeFile(path.join(folder, '.DS_Store'), 'skipped');
  }, 120_000);

  afterAll(async () => {
    await t?.stop();
    if (folder) await rm(folder, { recursive: true, force: true });
  });

  it('me runs from the built bundle, which holds none of the server', async () => {
    expect(bundleIsCurrent()).toBe(true);
    const result = await ok(['me']);
    // bin/tessera.js says so when it falls back to compiling the sources.
    expect(result.stderr).not.toContain('running the sources');
    expect(result.stdout).toMatch(/^organization\s+\S+ \(org_/m);
    expect(result.stdout).toMatch(/^permissions\s+read, write, delete, admin$/m);
    // Only the client's packages are imported by the bundle: no kernel, plugins, logger or native modules.
    const imported = [...readFileSync(bundle, 'utf8').matchAll(/^import .* from "([^"]+)";$/gm)].map((m) => m[1]!);
    expect(imported.filter((name) => !name.startsWith('node:')).sort()).toEqual(['commander', 'commander', 'openapi-fetch']);
  });

  it('ingests a folder: bucket created, keys from relative paths, sidecar and flag metadata, a completed batch and its documents', async () => {
    const result = await ok([
      'ingest', folder, '--bucket', 'library', '--collection', 'passages', '--prefix', 'shelf/',
      '--metadata', 'source=cli', '--metadata', 'year:=2026', '--concurrency', '2',
    ]);
    expect(result.stderr).toContain('created bucket library');
    expect(result.stderr).toContain('created collection passages');
    expect(result.stderr).toMatch(/upload 100%\s+3\/3 files/);
    expect(result.stdout).toMatch(/^status\s+COMPLETED$/m);
    expect(result.stdout).toMatch(/^documents\s+3$/m);

    const objects = await json(['objects', 'library']);
    const byKey = Object.fromEntries((objects.results as Array<{ key: string; metadata: object }>).map((o) => [o.key, o.metadata]));
    expect(Object.keys(byKey).sort()).toEqual(['shelf/lighthouse.txt', 'shelf/notes/bread.txt', 'shelf/notes/glacier.txt']);
    expect(byKey['shelf/lighthouse.txt']).toEqual({ source: 'cli', year: 2026, topic: 'sea', stars: 5 });
    expect(byKey['shelf/notes/bread.txt']).toEqual({ source: 'cli', year: 2026 });

    const documents = await json(['documents', 'list', 'passages']);
    expect(documents.results.length).toBeGreaterThanOrEqual(3);
    const table = (await ok(['documents', 'list', 'passages'])).stdout;
    expect(table.split('\n')[0]).toMatch(/^DOCUMENT ID\s+OBJECT\s+TIER\s+SUMMARY\s+CREATED$/);
    expect(table).toContain('Glaciers carve valleys');
    const one = (await ok(['documents', 'get', 'passages', documents.results[0].document_id])).stdout;
    expect(one).toMatch(/^fields\.text\s+\S/m);
  }, 180_000);

  it('prints tables by default and the API’s JSON with --json', async () => {
    const table = (await ok(['collections', 'list'])).stdout;
    expect(table.split('\n')[0]).toMatch(/^NAME\s+ID\s+SOURCE\s+EXTRACTORS\s+DOCUMENTS\s+STATUS$/);
    expect(table).toMatch(/^passages\s+col_\S+\s+bucket:bkt_\S+\s+text_extractor\s+\d+\s+\w+$/m);
    expect(() => JSON.parse(table)).toThrow();
    const listed = await json(['collections', 'list']);
    expect(listed).toMatchObject({ total: 1, results: [{ collection_name: 'passages' }] });
    expect((await json(['collections', 'get', 'passages'])).collection_name).toBe('passages');

    const extractors = (await ok(['extractors', 'list'])).stdout;
    expect(extractors).toMatch(/^text_extractor\s+\S+\s+text\/\*/m);
    expect((await json(['extractors', 'list'])).results.map((e: { name: string }) => e.name)).toContain('text_extractor');

    const buckets = (await ok(['buckets', 'list'])).stdout;
    expect(buckets).toMatch(/^library\s+bkt_\S+\s+3\s/m);
  });

  it('creates a batch over a key prefix, follows it, and lists it', async () => {
    const followed = await ok(['batches', 'create', '--bucket', 'library', '--prefix', 'shelf/notes/', '--follow']);
    expect(followed.stdout).toMatch(/^status\s+COMPLETED$/m);
    expect(followed.stdout).toMatch(/^records\s+2\/2 done/m);
    const draft = await json(['batches', 'create', '--bucket', 'library']);
    expect(draft).toMatchObject({ status: 'DRAFT' });
    expect(draft.object_ids).toHaveLength(3);
    const submitted = await json(['batches', 'submit', draft.batch_id, '--bucket', 'library']);
    expect(submitted.status).not.toBe('DRAFT');
    const done = await json(['batches', 'follow', draft.batch_id, '--bucket', 'library']);
    expect(done).toMatchObject({ batch_id: draft.batch_id, status: 'COMPLETED' });
    const listed = (await ok(['batches', 'list', '--bucket', 'library'])).stdout;
    expect(listed.split('\n')[0]).toMatch(/^BATCH ID\s+STATUS\s+OBJECTS/);
    expect(listed).toContain(draft.batch_id);
    expect((await ok(['batches', 'get', draft.batch_id, '--bucket', 'library'])).stdout).toMatch(/^status\s+COMPLETED$/m);
  }, 120_000);

  it('executes a retriever with --input and --inputs, printing ranked results', async () => {
    const created = await t.request('POST', '/v1/retrievers', {
      key: t.adminKey,
      headers: { 'X-Namespace': 'cli_docs' },
      body: {
        retriever_name: 'passage-search',
        collection_identifiers: ['passages'],
        input_schema: { query: { type: 'text', required: true }, k: { type: 'integer', default: 5 } },
        stages: [
          {
            stage_name: 'search',
            stage_type: 'filter',
            config: {
              stage_id: 'feature_search',
              parameters: { searches: [{ feature_uri: 'tessera://text_extractor@1.0/text_embedding', query: { text: '{{inputs.query}}' }, top_k: '{{inputs.k}}' }] },
            },
          },
        ],
      },
    });
    expect(created.status, created.text).toBe(201);
    const table = (await ok(['retrievers', 'execute', 'passage-search', '--input', 'query=bread flour salt', '--input', 'k:=2'])).stdout;
    const lines = table.trim().split('\n');
    expect(lines[0]).toMatch(/^#\s+SCORE\s+DOCUMENT ID\s+COLLECTION\s+RESULT$/);
    expect(lines[1]).toMatch(/^1\s+-?\d\.\d{4}\s+doc_\S+\s+col_\S+\s+Bread needs flour/);
    expect(lines.at(-1)).toBe('completed; 2 result(s)');
    const result = await json(['retrievers', 'execute', 'passage-search', '--inputs', '{"query": "glaciers and valleys", "k": 1}']);
    expect(result.status).toBe('completed');
    expect(result.documents).toHaveLength(1);
    expect((await ok(['retrievers', 'list'])).stdout).toMatch(/^passage-search\s+ret_\S+\s+1\s+k,query/m);
  }, 60_000);

  it('says what to do when the server is down, the namespace is missing or the key is refused', async () => {
    const port = await freePort();
    const down = await tessera(['collections', 'list'], { TESSERA_URL: `http://127.0.0.1:${port}` });
    expect(down.code).toBe(1);
    expect(down.stderr).toContain(`cannot reach Tessera at http://127.0.0.1:${port} (connection refused)`);
    expect(down.stderr).toContain(`Is the server running at http://127.0.0.1:${port}? Start it with \`npm start\``);

    const noNamespace = await tessera(['collections', 'list'], { TESSERA_NAMESPACE: '' });
    expect(noNamespace.code).toBe(1);
    expect(noNamespace.stderr).toContain('Pass --namespace <name> or set TESSERA_NAMESPACE');

    const unknown = await tessera(['buckets', 'list', '--namespace', 'nowhere']);
    expect(unknown.stderr).toContain("404 Not Found: Namespace 'nowhere' not found");
    expect(unknown.stderr).toContain('tessera namespaces create <name>');

    const noKey = await tessera(['me'], { TESSERA_API_KEY: '' });
    expect(noKey.code).toBe(1);
    expect(noKey.stderr).toContain('pass --key <key> or set TESSERA_API_KEY');
    const badKey = await tessera(['me', '--key', `svc_sk_${'x'.repeat(40)}`]);
    expect(badKey.stderr).toMatch(/401 Unauthorized/);
    expect(badKey.stderr).toContain('pass another with --key or TESSERA_API_KEY');

    const noBucket = await tessera(['batches', 'create', '--bucket', 'lonely', '--submit']);
    expect(noBucket.code).toBe(1);
    expect(noBucket.stderr).toMatch(/404 Not Found: Bucket 'lonely'/);
    await ok(['buckets', 'create', 'lonely']);
    await ok(['upload', 'lonely', path.join(folder, 'notes', 'bread.txt'), '--object-key', 'bread.txt']);
    const twice = await tessera(['buckets', 'create', 'lonely']);
    expect(twice.code).toBe(1);
    expect(twice.stderr).toMatch(/^tessera: 409 Conflict: .*already exists/m);
    expect(twice.stderr).toContain('Nothing was changed: use the existing one (the list and get commands show it), or choose another name.');
    const noCollection = await tessera(['batches', 'create', '--bucket', 'lonely', '--submit']);
    expect(noCollection.code).toBe(1);
    expect(noCollection.stderr).toMatch(/^tessera: 409 Conflict: No enabled collection reads this bucket/m);
    expect(noCollection.stderr).toContain('tessera collections create <name> --bucket lonely --extractor text_extractor');
    // The batch was kept as a DRAFT: the hint's two commands, run as printed, process it.
    const kept = /then submit this batch \(kept as a DRAFT\): tessera batches submit (btch_\S+) --bucket lonely$/m.exec(noCollection.stderr);
    expect(kept, noCollection.stderr).not.toBeNull();
    await ok(['collections', 'create', 'lonely-notes', '--bucket', 'lonely', '--extractor', 'text_extractor']);
    const followed = await ok(['batches', 'submit', kept![1]!, '--bucket', 'lonely', '--follow']);
    expect(followed.stdout).toMatch(/^status\s+COMPLETED$/m);
    expect(followed.stdout).toMatch(/^records\s+1\/1 done/m);
  }, 120_000);

  it('health shows every component; when a required one is down, which and why, with exit status 1', async () => {
    const up = await ok(['health']);
    expect(up.stdout).toMatch(/^status ok/);
    expect(up.stdout).toMatch(/database\s+up/);
    t.kernel.services.get(HealthRegistry).register({ name: 'archive', kind: 'test', required: true, probe: () => Promise.reject(new Error('the archive disk is full')) });
    const down = await tessera(['health']);
    expect(down.code, down.stderr).toBe(1);
    expect(down.stdout).toMatch(/^status down/);
    expect(down.stdout).toMatch(/archive\s+down\s+test\s+the archive disk is full/);
  });
});
