/**
 * Publication rows. Every public request reads its row from the database (no cache), so an unpublish or a
 * change answers at once in every API process. `PublishedStore` is also the kernel's
 * `PublishedRetrieverDirectory`.
 */
import type { Knex } from 'knex';
import type {
  DisplayConfig,
  PublishedRateLimits,
  PublishedRetrieverDirectory,
  PublishedRetrieverListQuery,
  PublishedRetrieverRecord,
} from '../../../kernel/retrieval/published.js';
import { passwordMatches } from './passwords.js';
import type { KeySealer } from './public-keys.js';

export interface PublicationRow {
  publication_id: string;
  public_name: string;
  organization_id: string;
  namespace_id: string;
  retriever_id: string;
  title: string;
  description: string | null;
  display_config: DisplayConfig;
  password_hash: string | null;
  api_key_hash: string;
  api_key_sealed: string;
  marketplace_listed: boolean;
  active: boolean;
  rate_limits: PublishedRateLimits;
  created_by: string | null;
  created_at: Date;
  updated_at: Date;
}

const JSON_COLUMNS = ['display_config', 'rate_limits'] as const;

function toColumns(row: Partial<PublicationRow>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...row };
  for (const column of JSON_COLUMNS) if (column in out) out[column] = JSON.stringify(out[column]);
  return out;
}

export function recordOf(row: PublicationRow): PublishedRetrieverRecord {
  return {
    publicationId: row.publication_id,
    publicName: row.public_name,
    retrieverId: row.retriever_id,
    organizationId: row.organization_id,
    namespaceId: row.namespace_id,
    title: row.title,
    description: row.description,
    displayConfig: row.display_config,
    passwordProtected: row.password_hash !== null,
    exposedFields: row.display_config.exposed_fields ?? [],
    marketplaceListed: row.marketplace_listed,
    active: row.active,
    rateLimits: row.rate_limits,
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}

export class PublishedStore implements PublishedRetrieverDirectory {
  constructor(
    private readonly db: Knex,
    private readonly sealer: KeySealer,
  ) {}

  row(publicName: string): Promise<PublicationRow | undefined> {
    return this.db<PublicationRow>('published_retrievers').where({ public_name: publicName }).first();
  }

  rowOf(organizationId: string, retrieverId: string): Promise<PublicationRow | undefined> {
    return this.db<PublicationRow>('published_retrievers').where({ organization_id: organizationId, retriever_id: retrieverId }).first();
  }

  rowById(publicationId: string): Promise<PublicationRow | undefined> {
    return this.db<PublicationRow>('published_retrievers').where({ publication_id: publicationId }).first();
  }

  async insert(row: PublicationRow): Promise<void> {
    await this.db('published_retrievers').insert(toColumns(row));
  }

  async update(publicationId: string, changes: Partial<PublicationRow>): Promise<void> {
    await this.db('published_retrievers').where({ publication_id: publicationId }).update(toColumns(changes));
  }

  async delete(publicationId: string): Promise<void> {
    await this.db('published_retrievers').where({ publication_id: publicationId }).delete();
  }

  async listOrganization(organizationId: string, limit: number, offset: number): Promise<{ rows: PublicationRow[]; total: number }> {
    const q = this.db<PublicationRow>('published_retrievers').where({ organization_id: organizationId });
    const [counted] = (await q.clone().count({ count: '*' })) as Array<{ count: string | number }>;
    const rows = await q.orderBy([{ column: 'created_at', order: 'desc' }, { column: 'publication_id', order: 'desc' }]).limit(limit).offset(offset);
    return { rows, total: Number(counted?.count ?? 0) };
  }

  /** The rows a public listing covers (before paging). `search` is a checked pattern in PostgreSQL `~` syntax. */
  private listing(query: Omit<PublishedRetrieverListQuery, 'offset' | 'limit'>) {
    const q = this.db<PublicationRow>('published_retrievers');
    if (!query.includeInactive) q.where({ active: true });
    if (query.marketplaceListed) q.where({ marketplace_listed: true });
    const search = query.search;
    if (search !== undefined) q.where((w) => w.whereRaw('title ~ ?', [search]).orWhereRaw("coalesce(description, '') ~ ?", [search]));
    return q;
  }

  async statistics(query: Omit<PublishedRetrieverListQuery, 'offset' | 'limit'>): Promise<{ total: number; active: number; protectedCount: number }> {
    const [row] = (await this.listing(query)
      .clone()
      .select(
        this.db.raw('count(*) as total'),
        this.db.raw('count(*) filter (where active) as active'),
        this.db.raw('count(*) filter (where password_hash is not null) as protected'),
      )) as unknown as Array<{ total: string | number; active: string | number; protected: string | number }>;
    return { total: Number(row?.total ?? 0), active: Number(row?.active ?? 0), protectedCount: Number(row?.protected ?? 0) };
  }

  // ------------------------------------------------------------------------------------- PublishedRetrieverDirectory
  async findByPublicName(publicName: string): Promise<PublishedRetrieverRecord | null> {
    const row = await this.row(publicName);
    return row ? recordOf(row) : null;
  }

  async findByRetrieverId(organizationId: string, retrieverId: string): Promise<PublishedRetrieverRecord | null> {
    const row = await this.rowOf(organizationId, retrieverId);
    return row ? recordOf(row) : null;
  }

  async list(query: PublishedRetrieverListQuery): Promise<{ records: PublishedRetrieverRecord[]; total: number }> {
    const { rows, total } = await this.listRows(query);
    return { records: rows.map(recordOf), total };
  }

  async listRows(query: PublishedRetrieverListQuery): Promise<{ rows: PublicationRow[]; total: number }> {
    const q = this.listing(query);
    const [counted] = (await q.clone().count({ count: '*' })) as Array<{ count: string | number }>;
    const rows = await q.orderBy([{ column: 'created_at', order: 'desc' }, { column: 'publication_id', order: 'desc' }]).limit(query.limit).offset(query.offset);
    return { rows, total: Number(counted?.count ?? 0) };
  }

  async checkPassword(publicationId: string, password: string): Promise<boolean> {
    const row = await this.rowById(publicationId);
    if (!row?.password_hash) return false;
    return passwordMatches(password, row.password_hash);
  }

  async publicApiKey(publicationId: string): Promise<string> {
    const row = await this.rowById(publicationId);
    if (!row) throw new Error(`publication ${publicationId} not found`);
    return this.sealer.open(row.api_key_sealed);
  }

  /** The publication whose `prk_` key hashes to this, or undefined. */
  async byApiKeyHash(hash: string): Promise<PublicationRow | undefined> {
    return this.db<PublicationRow>('published_retrievers').where({ api_key_hash: hash }).first();
  }
}
