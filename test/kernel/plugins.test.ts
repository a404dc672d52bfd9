/**
 * The plugin registry and the kernel's boot-time checks: every plugin enters by the same door and is
 * checked against its contract; a kernel whose plugins leave an operation unhandled, or handle one
 * twice, refuses to start.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  PluginContractError,
  PluginRegistry,
  defineExtractor,
  defineModel,
  defineResource,
  defineStage,
  loadPluginModules,
} from '../../kernel/plugins.js';
import builtins from '../../plugins/index.js';
import healthPlugin from '../../plugins/resources/health/index.js';
import { startTestKernel } from '../support/kernel.js';

function stage(id: string, overrides: Record<string, unknown> = {}) {
  return {
    ...defineStage({
      id,
      version: '1.0.0',
      type: 'filter',
      description: 'test stage',
      parameters: { type: 'object', properties: { limit: { type: 'integer' } } },
      run: async (_ctx, docs) => docs,
    }),
    ...overrides,
  };
}

function extractor(name: string, overrides: Record<string, unknown> = {}) {
  return {
    ...defineExtractor({
      name,
      version: 'v1',
      description: 'test extractor',
      accepts: ['text/plain'],
      inputs: [{ name: 'text', type: 'text', required: true }],
      parameters: { type: 'object' },
      features: [],
      fields: { type: 'object', properties: { text: { type: 'string' } } },
      // eslint-disable-next-line require-yield
      extract: async function* () {
        return;
      },
    }),
    ...overrides,
  };
}

function model(name: string) {
  return defineModel({ name, task: 'embed_text', dims: 4, load: async () => {}, infer: async (inputs) => inputs.map(() => [0, 0, 0, 0]) });
}

function expectContractError(fn: () => void, message: RegExp): void {
  let thrown: unknown;
  try {
    fn();
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(PluginContractError);
  expect((thrown as Error).message).toMatch(message);
}

describe('PluginRegistry', () => {
  it('accepts one plugin of every kind and files it by kind', () => {
    const registry = new PluginRegistry();
    registry.add(defineResource({ name: 'things', handlers: {} }), 'test');
    registry.add(stage('my_filter'), 'test');
    registry.add(extractor('my_extractor'), 'test');
    registry.add(model('my_model'), 'test');
    expect(registry.resources.map((r) => r.name)).toEqual(['things']);
    expect([...registry.stages.keys()]).toEqual(['my_filter']);
    expect([...registry.extractors.keys()]).toEqual(['my_extractor']);
    expect([...registry.models.keys()]).toEqual(['my_model']);
  });

  it('registers every built-in plugin', () => {
    const registry = new PluginRegistry();
    for (const plugin of builtins) registry.add(plugin, 'builtin');
    expect(registry.resources.map((r) => r.name).sort()).toEqual([
      'analytics', 'api-keys', 'audit-log', 'batches', 'buckets', 'collections', 'health', 'manifests', 'marketplace', 'namespace-templates',
      'namespaces', 'published-retrievers', 'retrievers', 'search-page', 'secrets', 'storage', 'usage', 'users', 'webhooks',
    ]);
    expect([...registry.stages.keys()].sort()).toEqual(['aggregate', 'attribute_filter', 'deduplicate', 'document_enrich', 'feature_search', 'group_by', 'json_transform', 'limit', 'mmr', 'rag_prepare', 'rerank', 'sample', 'score_normalize', 'sort_attribute', 'sort_relevance', 'text_search', 'unwind']);
    expect([...registry.extractors.keys()].sort()).toEqual(['audio_extractor', 'image_extractor', 'passthrough_extractor', 'pdf_extractor', 'text_extractor', 'video_extractor']);
    expect([...registry.models.keys()].sort()).toEqual(['hashed-ngram-text', 'image-descriptor', 'lexical-reranker', 'log-mel-audio', 'paddle-ocr']);
  });

  it('rejects a duplicate resource name, naming where the duplicate came from', () => {
    const registry = new PluginRegistry();
    registry.add(defineResource({ name: 'things', handlers: {} }), 'first');
    expectContractError(() => registry.add(defineResource({ name: 'things', handlers: {} }), 'second-origin'), /second-origin.*things.*already registered/);
    expect(registry.resources).toHaveLength(1);
  });

  it('rejects a duplicate built-in resource', () => {
    const registry = new PluginRegistry();
    for (const plugin of builtins) registry.add(plugin, 'builtin');
    expectContractError(() => registry.add(healthPlugin, 'third-party'), /'health' is already registered/);
  });

  it('rejects a duplicate stage id', () => {
    const registry = new PluginRegistry();
    registry.add(stage('dup_stage'), 'a');
    expectContractError(() => registry.add(stage('dup_stage', { version: '2.0.0' }), 'b'), /stage named 'dup_stage' is already registered/);
    expect(registry.stages.size).toBe(1);
  });

  it("rejects a stage whose check is not a function or whose rawParameters are not parameter names", () => {
    const registry = new PluginRegistry();
    expectContractError(() => registry.add(stage('bad_check', { check: 'yes' }), 'a'), /bad_check's check is not a function/);
    expectContractError(() => registry.add(stage('bad_raw', { rawParameters: 'template' }), 'a'), /bad_raw's rawParameters must be a list/);
    registry.add(stage('good_hooks', { check: () => [], rawParameters: ['template'] }), 'a');
    expect([...registry.stages.keys()]).toEqual(['good_hooks']);
  });

  it('rejects a duplicate extractor name', () => {
    const registry = new PluginRegistry();
    registry.add(extractor('dup_extractor'), 'a');
    expectContractError(() => registry.add(extractor('dup_extractor'), 'b'), /extractor named 'dup_extractor' is already registered/);
  });

  it('rejects a duplicate model name', () => {
    const registry = new PluginRegistry();
    registry.add(model('dup_model'), 'a');
    expectContractError(() => registry.add(model('dup_model'), 'b'), /model named 'dup_model' is already registered/);
  });

  it('allows a stage and an extractor to share a name (different kinds)', () => {
    const registry = new PluginRegistry();
    registry.add(stage('shared_name'), 'a');
    registry.add(extractor('shared_name'), 'b');
    expect(registry.stages.has('shared_name') && registry.extractors.has('shared_name')).toBe(true);
  });

  it('rejects invalid parameter JSON Schemas', () => {
    const registry = new PluginRegistry();
    expectContractError(() => registry.add(stage('bad_schema', { parameters: { type: 'not-a-type' } }), 'x'), /stage bad_schema parameters is not a valid JSON Schema/);
    expectContractError(() => registry.add(stage('bad_schema2', { parameters: { properties: 5 } }), 'x'), /not a valid JSON Schema/);
    expectContractError(() => registry.add(stage('bad_schema3', { parameters: { minLength: -1 } }), 'x'), /not a valid JSON Schema/);
    expectContractError(() => registry.add(extractor('bad_params', { parameters: { required: 'all' } }), 'x'), /extractor bad_params parameters is not a valid JSON Schema/);
    expectContractError(() => registry.add(extractor('bad_fields', { fields: { type: ['object', 7] } }), 'x'), /extractor bad_fields fields is not a valid JSON Schema/);
    expect(registry.stages.size + registry.extractors.size).toBe(0);
  });

  it('rejects things that are not plugins', () => {
    const registry = new PluginRegistry();
    for (const value of [undefined, null, 42, 'health', [], {}, { name: 'no-kind', handlers: {} }, () => {}]) {
      expectContractError(() => registry.add(value, 'junk-module'), /junk-module: not a plugin/);
    }
    expectContractError(() => registry.add({ kind: 'widget', name: 'w' }, 'junk-module'), /unknown plugin kind 'widget'/);
  });

  it('rejects plugins that break their contract', () => {
    const registry = new PluginRegistry();
    expectContractError(() => registry.add(defineResource({ name: 'Bad Name', handlers: {} }), 'x'), /must match/);
    expectContractError(() => registry.add({ kind: 'resource', name: 'no_handlers' }, 'x'), /has no handlers/);
    expectContractError(() => registry.add({ kind: 'resource', name: 'null_handlers', handlers: null }, 'x'), /has no handlers/);
    expectContractError(() => registry.add({ kind: 'resource', name: 'list_handlers', handlers: [] }, 'x'), /has no handlers/);
    expectContractError(
      () => registry.add({ kind: 'resource', name: 'string_handler', handlers: { getHealth: 'not a function' } }, 'x'),
      /handler for 'getHealth' is not a function/,
    );
    expectContractError(() => registry.add(stage('no_version', { version: 'latest' }), 'x'), /version 'latest'/);
    expectContractError(() => registry.add(stage('no_run', { run: undefined }), 'x'), /has no run\(\)/);
    expectContractError(() => registry.add(extractor('no_extract', { extract: 'nope' }), 'x'), /has no extract\(\)/);
    expectContractError(() => registry.add({ kind: 'model', name: 'half_model', load: async () => {} }, 'x'), /needs load\(\) and infer\(\)/);
    expect(registry.resources.length + registry.stages.size + registry.extractors.size + registry.models.size).toBe(0);
  });
});

describe('loadPluginModules', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'tessera-plugins-'));
    await writeFile(path.join(dir, 'not-a-plugin.mjs'), 'export default { hello: "world" };\n');
    await writeFile(path.join(dir, 'no-default.mjs'), 'export const plugin = { kind: "resource", name: "named_only", handlers: {} };\n');
    await writeFile(
      path.join(dir, 'two.mjs'),
      'export default [{ kind: "resource", name: "first_one", handlers: {} }, { kind: "resource", name: "second_one", handlers: {} }];\n',
    );
    await writeFile(path.join(dir, 'dup.mjs'), 'export default { kind: "resource", name: "first_one", handlers: {} };\n');
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('loads a module whose default export is a list of plugins', async () => {
    const registry = new PluginRegistry();
    await loadPluginModules(registry, ['./two.mjs'], dir);
    expect(registry.resources.map((r) => r.name)).toEqual(['first_one', 'second_one']);
  });

  it('rejects a module whose default export is not a plugin', async () => {
    const registry = new PluginRegistry();
    await expect(loadPluginModules(registry, [path.join(dir, 'not-a-plugin.mjs')], dir)).rejects.toThrow(PluginContractError);
    await expect(loadPluginModules(registry, [path.join(dir, 'not-a-plugin.mjs')], dir)).rejects.toThrow(/not a plugin/);
  });

  it('rejects a module without a default export', async () => {
    const registry = new PluginRegistry();
    await expect(loadPluginModules(registry, ['./no-default.mjs'], dir)).rejects.toThrow(/has no default export/);
  });

  it('rejects a module that registers a name already taken', async () => {
    const registry = new PluginRegistry();
    await expect(loadPluginModules(registry, ['./two.mjs', './dup.mjs'], dir)).rejects.toThrow(/'first_one' is already registered/);
  });
});

describe('startKernel plugin checks', () => {
  it('refuses to start when an operation has no handler', async () => {
    const withoutHealth = builtins.filter((plugin) => plugin !== healthPlugin);
    expect(withoutHealth).toHaveLength(builtins.length - 1);
    await expect(startTestKernel({ plugins: withoutHealth })).rejects.toThrow(/no plugin handles these operations: .*getHealth/);
  });

  it('refuses a third-party resource that claims an operation another plugin handles', async () => {
    const thief = defineResource({
      name: 'health-thief',
      handlers: {
        getHealth: async () => ({ status: 200, body: { status: 'ok', version: 'x', uptime_seconds: 0, view: 'public', components: {} } }),
      },
    });
    await expect(startTestKernel({ plugins: [...builtins, thief] })).rejects.toThrow(/operation 'getHealth' has two handlers/);
  });

  it('refuses a resource that handles an operation the OpenAPI document does not define', async () => {
    const stray = { kind: 'resource', name: 'stray', handlers: { launchRockets: async () => ({ status: 200, body: {} }) } };
    await expect(startTestKernel({ plugins: [...builtins, stray] })).rejects.toThrow(/'launchRockets', which the OpenAPI document does not define/);
  });

  it('refuses a plugin list containing something that is not a plugin', async () => {
    await expect(startTestKernel({ plugins: [...builtins, { name: 'imposter' }] })).rejects.toThrow(PluginContractError);
  });
});
