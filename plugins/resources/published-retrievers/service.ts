/**
 * Publishing: one publication per saved retriever, under a public name unique across the service, with a
 * display config checked field by field, an optional password (scrypt hash only), rate limits from a tier or
 * explicit numbers, a marketplace flag and a deprecated `prk_` key.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import type { components } from '../../../generated/openapi.js';
import type { Clock } from '../../../kernel/clock.js';
import { ConflictError, InputError, NotFoundError, RequestValidationError } from '../../../kernel/errors.js';
import { isUniqueViolation } from '../../../kernel/http/values.js';
import { newId } from '../../../kernel/ids.js';
import type { RetrieverExecutor, SavedRetrieverDefinition } from '../../../kernel/retrieval/executor.js';
import type { DisplayConfig } from '../../../kernel/retrieval/published.js';
import { hashPassword } from './passwords.js';
import { mintPublicKey, publicKeyHash, type KeySealer } from './public-keys.js';
import { resolveRateLimits } from './rate-limits.js';
import type { PublicationRow, PublishedStore } from './store.js';

type Schemas = components['schemas'];

/** Names that are, or may become, words of the public paths and pages. */
const RESERVED_PUBLIC_NAMES = new Set(['execute', 'api', 'admin', 'www', 'static', 'assets', 'public', 'catalog', 'marketplace', 'search']);

export interface Publisher {
  organizationId: string;
  namespaceId: string;
  userEmail: string | null;
}

export class PublishingService {
  private readonly checkDisplay: ValidateFunction;

  constructor(
    private readonly store: PublishedStore,
    private readonly retrievers: () => RetrieverExecutor,
    private readonly sealer: KeySealer,
    private readonly clock: Clock,
    displayConfigSchema: Record<string, unknown>,
  ) {
    this.checkDisplay = new Ajv({ allErrors: false, strict: false }).compile(displayConfigSchema);
  }

  async retriever(publisher: Publisher, nameOrId: string): Promise<SavedRetrieverDefinition> {
    const found = await this.retrievers().find(publisher.organizationId, publisher.namespaceId, nameOrId);
    if (!found) throw new NotFoundError(`Retriever '${nameOrId}' not found in this namespace`, { retriever: nameOrId });
    return found;
  }

  async get(publisher: Publisher, nameOrId: string): Promise<PublicationRow> {
    const retriever = await this.retriever(publisher, nameOrId);
    const row = await this.store.rowOf(publisher.organizationId, retriever.retrieverId);
    if (!row) throw new NotFoundError(`Retriever '${retriever.retrieverName}' is not published: publish it with POST /v1/retrievers/{retriever_id}/publish`);
    return row;
  }

  async publish(publisher: Publisher, nameOrId: string, body: Schemas['PublishRetrieverRequest']): Promise<PublicationRow> {
    const retriever = await this.retriever(publisher, nameOrId);
    this.checkPublicName(body.public_name);
    const existing = await this.store.rowOf(publisher.organizationId, retriever.retrieverId);
    if (existing) {
      throw new ConflictError(`Retriever '${retriever.retrieverName}' is already published as '${existing.public_name}': change it with PATCH, or unpublish it first`, {
        public_name: existing.public_name,
      });
    }
    const display = body.display_config ?? this.storedDisplayConfig(retriever);
    const key = mintPublicKey();
    const now = this.clock.now();
    const row: PublicationRow = {
      publication_id: newId('pub'),
      public_name: body.public_name,
      organization_id: publisher.organizationId,
      namespace_id: retriever.namespaceId,
      retriever_id: retriever.retrieverId,
      title: body.title ?? display.title ?? retriever.retrieverName,
      description: body.description !== undefined ? body.description : (display.description ?? retriever.description),
      display_config: display,
      password_hash: body.password !== undefined ? await hashPassword(body.password) : null,
      api_key_hash: publicKeyHash(key),
      api_key_sealed: this.sealer.seal(key),
      marketplace_listed: body.marketplace_listed ?? false,
      active: body.active ?? true,
      rate_limits: resolveRateLimits(body.rate_limits),
      created_by: publisher.userEmail,
      created_at: now,
      updated_at: now,
    };
    try {
      await this.store.insert(row);
    } catch (err) {
      if (isUniqueViolation(err)) throw this.nameTaken(body.public_name);
      throw err;
    }
    return row;
  }

  async update(publisher: Publisher, nameOrId: string, patch: Schemas['PublishedRetrieverUpdateRequest']): Promise<PublicationRow> {
    const row = await this.get(publisher, nameOrId);
    const changes: Partial<PublicationRow> = {};
    if (patch.public_name !== undefined && patch.public_name !== row.public_name) {
      this.checkPublicName(patch.public_name);
      changes.public_name = patch.public_name;
    }
    if (patch.title !== undefined) changes.title = patch.title;
    if (patch.description !== undefined) changes.description = patch.description;
    if (patch.display_config !== undefined) changes.display_config = patch.display_config;
    if (patch.password !== undefined) changes.password_hash = patch.password === null ? null : await hashPassword(patch.password);
    if (patch.rate_limits !== undefined) changes.rate_limits = resolveRateLimits(patch.rate_limits, row.rate_limits);
    if (patch.marketplace_listed !== undefined) changes.marketplace_listed = patch.marketplace_listed;
    if (patch.active !== undefined) changes.active = patch.active;
    if (Object.keys(patch).length === 0) {
      throw new InputError('Nothing to update: give public_name, title, description, display_config, password, rate_limits, marketplace_listed or active');
    }
    changes.updated_at = this.clock.now();
    try {
      await this.store.update(row.publication_id, changes);
    } catch (err) {
      if (isUniqueViolation(err)) throw this.nameTaken(changes.public_name ?? row.public_name);
      throw err;
    }
    return { ...row, ...changes };
  }

  async unpublish(publisher: Publisher, nameOrId: string): Promise<PublicationRow> {
    const row = await this.get(publisher, nameOrId);
    await this.store.delete(row.publication_id);
    return row;
  }

  /** The retriever's own display config, when it is a valid published one. */
  private storedDisplayConfig(retriever: SavedRetrieverDefinition): DisplayConfig {
    if (this.checkDisplay(retriever.displayConfig)) return retriever.displayConfig as DisplayConfig;
    const problem = this.checkDisplay.errors?.[0];
    throw new InputError(
      `The retriever's display_config cannot be published (${problem?.instancePath || '/'} ${problem?.message ?? 'is invalid'}): give a display_config in the publish body`,
    );
  }

  private checkPublicName(name: string): void {
    if (RESERVED_PUBLIC_NAMES.has(name)) {
      throw new RequestValidationError([{ loc: ['body', 'public_name'], msg: `'${name}' is reserved: choose another public name`, type: 'reserved_name' }]);
    }
  }

  private nameTaken(name: string): ConflictError {
    return new ConflictError(`The public name '${name}' is taken: choose another`, { public_name: name });
  }
}
