/**
 * The plugin contracts and their registries. Built-in and third-party plugins enter by the same door:
 * a module whose default export is a plugin (or a list of them), checked against its contract here.
 */
import { Ajv, type AnySchema } from 'ajv';
import type { Container } from 'inversify';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import type { Migration } from './db/migrations.js';
import type { EventBus } from './events/event-bus.js';
import type { Lifecycle } from './lifecycle.js';
import type { HandlerMap } from './http/handlers.js';
import type { ResolvedNamespace } from './auth/namespaces.js';
import type { JsonSchema } from './json-schema.js';
import type { InferenceClient } from './inference/client.js';
import type { BlobStore } from './blobs/blob-store.js';
import type { ProcessSlots } from './media/process-slots.js';
import type { Services } from './tokens.js';
import type { StageOptimizerTraits } from './retrieval/optimizer.js';
import type { RetrievalFeature } from './retrieval/documents.js';

export type { JsonSchema };

/** What a plugin gets when the kernel sets it up. */
export interface PluginContext {
  container: Container;
  services: Services;
  config: Config;
  log: Logger;
  lifecycle: Lifecycle;
  events: EventBus;
}

// ---------------------------------------------------------------------------------------------- resources

export interface ResourcePlugin {
  kind: 'resource';
  name: string;
  migrations?: readonly Migration[];
  /** Binds the services the plugin provides (its own tokens, or kernel interfaces it implements). */
  services?: (container: Container, services: Services) => void;
  /** Runs after every plugin's services are bound and migrations applied (subscriptions, timers). */
  setup?: (ctx: PluginContext) => void | Promise<void>;
  handlers: HandlerMap;
}

export function defineResource(definition: Omit<ResourcePlugin, 'kind'>): ResourcePlugin {
  return { kind: 'resource', ...definition };
}

// ---------------------------------------------------------------------------------------------- stages

export type StageType = 'filter' | 'sort' | 'reduce' | 'group' | 'apply' | 'enrich';

export interface StageBudget {
  maxCredits: number | null;
  maxTimeMs: number | null;
  creditsUsed: number;
  /** Epoch ms after which the execution stops (the smaller of `max_time_ms` and `max_execution_time_ms`). */
  deadline: number | null;
  maxInferenceCalls: number | null;
  /** Calls to the inference workers so far: a stage that calls them adds its own. */
  inferenceCalls: number;
  /** `max_llm_tokens`: what stages that produce text for a language model (rag_prepare) may produce in all. */
  maxLlmTokens?: number | null;
  /** Language-model tokens produced so far: such a stage adds its own and never goes past `maxLlmTokens`. */
  llmTokens?: number;
  /**
   * Set by a stage that left content out because `maxLlmTokens` allowed no more (not its own limits): the
   * execution then stops with `budget_exceeded` naming `max_llm_tokens`, returning what that stage made.
   */
  llmLimitReached?: boolean;
}

/** A collection a retriever runs over, as stages see it. */
export interface RetrievalCollection {
  collection_id: string;
  collection_name: string;
  namespace_id: string;
  /** Its features as resolved with it (saves reading the collection again); absent: ask DocumentSource.features. */
  features?: readonly RetrievalFeature[];
}

export interface StageContext {
  organizationId: string;
  namespace: ResolvedNamespace;
  /** The collections the retriever runs over (resolved from `collection_identifiers`). */
  collections: readonly RetrievalCollection[];
  /** The stage's position in the pipeline: the first stage (0) reads the collections, later ones refine what they get. */
  stageIndex: number;
  inputs: Record<string, unknown>;
  budget: StageBudget;
  /** Set for user-scoped keys: stages must only return documents this principal may read. */
  principalId: string | null;
  /**
   * Other collections of the namespace (by id or name) a stage reads besides the retriever's own (e.g. to
   * join from): each is checked against the caller's key scopes (`read_data`) exactly as the retriever's
   * collections are. Absent where no caller's scopes are known: such a stage must then refuse.
   */
  resolveCollections?: (identifiers: readonly string[]) => Promise<RetrievalCollection[]>;
  log: Logger;
  container: Container;
  /** Aborted when the caller went away (a streaming client hung up): a long stage may stop early. */
  signal?: AbortSignal;
}

export interface StageDocument {
  document_id: string;
  /** The collection the document belongs to. */
  collection_id?: string;
  score?: number;
  /** The document as a document read returns it (fields, metadata, lineage). */
  payload?: Record<string, unknown>;
  [field: string]: unknown;
}

/** A parameter problem a stage's own check finds: where (a path inside `parameters`) and what. */
export interface StageParameterProblem {
  path: Array<string | number>;
  message: string;
}

export interface StagePlugin<P = Record<string, unknown>> {
  kind: 'stage';
  id: string;
  version: string;
  type: StageType;
  description: string;
  /** JSON Schema of `config.parameters`, checked with ajv on create and on run. */
  parameters: JsonSchema;
  /**
   * Top-level parameters the engine passes as written, without filling `{{inputs.x}}` placeholders: the
   * stage reads `inputs` itself (templates), so an input's text is never spliced into its syntax.
   */
  rawParameters?: readonly string[];
  /**
   * Checks what a JSON Schema cannot (e.g. that templates parse), when a retriever is defined and after the
   * schema passed; placeholders outside `rawParameters` are still unfilled. Each problem is a 422.
   */
  check?: (params: P, definition: { inputNames: readonly string[] }) => StageParameterProblem[];
  run(ctx: StageContext, docs: StageDocument[], params: P): Promise<StageDocument[]>;
  cost?: (params: P) => number;
  /** Promises about the stage's behaviour that let the optimizer rewrite pipelines (kernel/retrieval/optimizer.ts). */
  optimizer?: StageOptimizerTraits<P>;
  /**
   * An upper bound of the documents the stage returns from `input` documents (`first`: it reads the
   * collections, `source` visible documents), for explain; absent: it returns at most its input (first: none).
   */
  estimateOutput?: (params: P, input: number, at: { first: boolean; source: number }) => number;
}

export function defineStage<P = Record<string, unknown>>(definition: Omit<StagePlugin<P>, 'kind'>): StagePlugin<P> {
  return { kind: 'stage', ...definition };
}

// ---------------------------------------------------------------------------------------------- extractors

export interface FeatureSpec {
  name: string;
  /** Size with the default model; see `modelParameter`. */
  dims: number;
  distance: 'cosine' | 'l2' | 'dot';
  /** The default model. */
  model: string;
  /**
   * The extractor parameter that picks the model computing this feature, when users may choose one (e.g.
   * an ONNX model from TESSERA_MODEL_DIR): the collection then records that model and its dims.
   */
  modelParameter?: string;
  /**
   * Present only on documents that have it (e.g. the embedding of text read off an image that has text):
   * never a made-up vector. Required features are on every document.
   */
  optional?: boolean;
}

export interface DocumentDraft {
  /** Stable key of this draft within its source object, so re-running never duplicates a document. */
  key: string;
  fields: Record<string, unknown>;
  features?: Record<string, number[]>;
}

export interface ExtractorContext {
  organizationId: string;
  namespace: ResolvedNamespace;
  log: Logger;
  /** Models run in inference workers, reached over gRPC: heavy work never runs on the caller's event loop. */
  inference: InferenceClient;
  /** Reads blobs referenced by inputs (large media is streamed from here, not passed inline). */
  blobs: BlobStore;
  /** Stores files an extractor derives (thumbnails, keyframes) under keys owned by the document being made. */
  artifacts: ArtifactWriter;
  /**
   * The bound on helper processes (ffmpeg) this process runs at once: pass it as `slots` to the media
   * helpers of kernel/media. Absent, an extractor's runs are bounded only by the extractor itself.
   */
  mediaProcesses?: ProcessSlots;
}

/** A stored blob as document fields reference it (the same shape inputs use for media). */
export interface BlobReference {
  storage_key: string;
  content_type: string;
  size_bytes: number;
}

export interface ArtifactWriter {
  /**
   * Saves `data` as `name` (e.g. `thumbnail.jpg`, `scene-3/keyframe.jpg`) for the current source record.
   * Saving the same name again replaces it, so a redelivered task never leaves duplicates.
   */
  save(name: string, data: Buffer, contentType: string): Promise<BlobReference>;
}

export interface ExtractorInput {
  /** The bucket object every document of this chain comes from. */
  objectId: string;
  /** The sniffed content type of the primary input, when it is a blob. */
  mimeType: string;
  /**
   * The extractor's inputs, by input name, after `input_mapping`: text as a string, JSON as its value, media
   * as `{ storage_key, content_type, size_bytes }` to read from `ctx.blobs`; plus every other source field.
   */
  fields: Record<string, unknown>;
  /** The collection's parameters for this extractor, checked against its schema, defaults filled in. */
  parameters: Record<string, unknown>;
}

/** A named input an extractor reads from each source record (mapped with `input_mapping`). */
export interface ExtractorInputSpec {
  name: string;
  type: 'text' | 'image' | 'video' | 'audio' | 'pdf' | 'json' | 'any';
  required: boolean;
  description?: string;
}

export interface ExtractorPlugin {
  kind: 'extractor';
  name: string;
  version: string;
  description: string;
  accepts: readonly string[];
  inputs: readonly ExtractorInputSpec[];
  parameters: JsonSchema;
  features: readonly FeatureSpec[];
  fields: JsonSchema;
  extract(ctx: ExtractorContext, input: ExtractorInput): AsyncIterable<DocumentDraft>;
}

export function defineExtractor(definition: Omit<ExtractorPlugin, 'kind'>): ExtractorPlugin {
  return { kind: 'extractor', ...definition };
}

// ---------------------------------------------------------------------------------------------- models

export type ModelTask = 'embed_text' | 'embed_image' | 'embed_audio' | 'rerank' | 'ocr' | 'transcribe';

export interface ModelPlugin<I = unknown, O = unknown> {
  kind: 'model';
  name: string;
  task: ModelTask;
  dims?: number;
  /** Loaded only inside inference workers. */
  load(): Promise<void>;
  infer(inputs: I[]): Promise<O[]>;
}

export function defineModel<I = unknown, O = unknown>(definition: Omit<ModelPlugin<I, O>, 'kind'>): ModelPlugin<I, O> {
  return { kind: 'model', ...definition };
}

// ---------------------------------------------------------------------------------------------- registry

export type Plugin = ResourcePlugin | StagePlugin<never> | ExtractorPlugin | ModelPlugin<never, never>;

export class PluginContractError extends Error {}

const NAME = /^[a-z][a-z0-9_-]{1,63}$/;
const VERSION = /^v?\d+(\.\d+){0,2}$/;

/** Every plugin the process runs with, by kind; rejects duplicates and contract violations at boot. */
export class PluginRegistry {
  readonly resources: ResourcePlugin[] = [];
  readonly stages = new Map<string, StagePlugin<never>>();
  readonly extractors = new Map<string, ExtractorPlugin>();
  readonly models = new Map<string, ModelPlugin<never, never>>();
  private readonly ajv = new Ajv({ strict: false });

  add(plugin: unknown, origin: string): void {
    if (!plugin || typeof plugin !== 'object' || !('kind' in plugin)) {
      throw new PluginContractError(`${origin}: not a plugin (use defineResource/defineStage/defineExtractor/defineModel)`);
    }
    const p = plugin as Plugin;
    switch (p.kind) {
      case 'resource':
        this.requireName(p.name, origin);
        if (this.resources.some((r) => r.name === p.name)) this.duplicate('resource', p.name, origin);
        if (!p.handlers || typeof p.handlers !== 'object' || Array.isArray(p.handlers)) {
          throw new PluginContractError(`${origin}: resource ${p.name} has no handlers`);
        }
        for (const [operationId, handler] of Object.entries(p.handlers)) {
          if (typeof handler !== 'function') {
            throw new PluginContractError(`${origin}: resource ${p.name}'s handler for '${operationId}' is not a function`);
          }
        }
        this.resources.push(p);
        return;
      case 'stage':
        this.requireName(p.id, origin);
        this.requireVersion(p.version, origin);
        this.requireSchema(p.parameters, `${origin}: stage ${p.id} parameters`);
        if (typeof p.run !== 'function') throw new PluginContractError(`${origin}: stage ${p.id} has no run()`);
        if (p.check !== undefined && typeof p.check !== 'function') throw new PluginContractError(`${origin}: stage ${p.id}'s check is not a function`);
        if (p.rawParameters !== undefined && !(Array.isArray(p.rawParameters) && p.rawParameters.every((k) => typeof k === 'string'))) {
          throw new PluginContractError(`${origin}: stage ${p.id}'s rawParameters must be a list of parameter names`);
        }
        if (this.stages.has(p.id)) this.duplicate('stage', p.id, origin);
        this.stages.set(p.id, p);
        return;
      case 'extractor':
        this.requireName(p.name, origin);
        this.requireVersion(p.version, origin);
        this.requireSchema(p.parameters, `${origin}: extractor ${p.name} parameters`);
        this.requireSchema(p.fields, `${origin}: extractor ${p.name} fields`);
        if (typeof p.extract !== 'function') throw new PluginContractError(`${origin}: extractor ${p.name} has no extract()`);
        if (this.extractors.has(p.name)) this.duplicate('extractor', p.name, origin);
        this.extractors.set(p.name, p);
        return;
      case 'model':
        this.requireName(p.name, origin);
        if (typeof p.load !== 'function' || typeof p.infer !== 'function') {
          throw new PluginContractError(`${origin}: model ${p.name} needs load() and infer()`);
        }
        if (this.models.has(p.name)) this.duplicate('model', p.name, origin);
        this.models.set(p.name, p);
        return;
      default:
        throw new PluginContractError(`${origin}: unknown plugin kind '${(p as { kind: unknown }).kind}'`);
    }
  }

  private requireName(name: unknown, origin: string): void {
    if (typeof name !== 'string' || !NAME.test(name)) {
      throw new PluginContractError(`${origin}: plugin name/id '${String(name)}' must match ${NAME}`);
    }
  }

  private requireVersion(version: unknown, origin: string): void {
    if (typeof version !== 'string' || !VERSION.test(version)) {
      throw new PluginContractError(`${origin}: version '${String(version)}' must look like 1, 1.2 or v1.2.3`);
    }
  }

  private requireSchema(schema: unknown, what: string): void {
    try {
      this.ajv.compile(schema as AnySchema);
    } catch (err) {
      throw new PluginContractError(`${what} is not a valid JSON Schema: ${(err as Error).message}`);
    }
  }

  private duplicate(kind: string, id: string, origin: string): never {
    throw new PluginContractError(`${origin}: a ${kind} named '${id}' is already registered`);
  }
}

/** Loads plugin modules by specifier (a path or a package name); the default export is one plugin or a list. */
export async function loadPluginModules(registry: PluginRegistry, specifiers: readonly string[], baseDir: string): Promise<void> {
  const { pathToFileURL } = await import('node:url');
  const path = await import('node:path');
  for (const specifier of specifiers) {
    const target = specifier.startsWith('.') || path.isAbsolute(specifier)
      ? pathToFileURL(path.resolve(baseDir, specifier)).href
      : specifier;
    const mod = (await import(target)) as { default?: unknown };
    const exported = mod.default;
    if (exported === undefined) throw new PluginContractError(`${specifier}: has no default export`);
    for (const plugin of Array.isArray(exported) ? exported : [exported]) registry.add(plugin, specifier);
  }
}

/** The plugins the modules export, each with the specifier it came from, for `KernelOptions.plugins`. */
export async function importPluginModules(specifiers: readonly string[], baseDir: string): Promise<Array<{ plugin: unknown; origin: string }>> {
  const loaded: Array<{ plugin: unknown; origin: string }> = [];
  const collector = { add: (plugin: unknown, origin: string) => void loaded.push({ plugin, origin }) } as unknown as PluginRegistry;
  await loadPluginModules(collector, specifiers, baseDir);
  return loaded;
}
