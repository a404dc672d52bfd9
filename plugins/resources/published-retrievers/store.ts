/**
 * Publication rows. With a shared database (PostgreSQL, several API processes) every public request reads its
 * row from the database, so an unpublish or a change answers at once in every process. When this process is
 * the database's only writer (the embedded default) rows are kept in memory and every write here forgets them
 * before it answers (kernel/db/local-read-cache.ts). `PublishedStore` is also the kernel's
 * `PublishedRetrieverDirectory`.
 */
import type { Knex } from 'knex';
import type { DatabaseNotices } from '../../../kernel/db/database.js';
import { deepFreeze, LocalReadCache } from '../../../kernel/db/local-read-cache.js';
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
  /** Rows by public name, while this process is the only writer. */
  private readonly rows: LocalReadCache<PublicationRow>;

  constructor(
    private readonly db: Knex,
    private readonly sealer: KeySealer,
    options: {
      onlyWriter: boolean;
      /** The threads sharing the embedded database, told what this cache forgets. */
      notices?: DatabaseNotices;
      /** Whether the publication's retriever still exists (read in memory where rows are kept). */
      retrieverExists?: (row: PublicationRow) => Promise<boolean>;
    } = { onlyWriter: false },
  ) {
    this.rows = new LocalReadCache({ enabled: options.onlyWriter, maxEntries: 10_000, shared: { name: 'publications', notices: options.notices } });
    this.retrieverExists = options.retrieverExists;
  }

  private readonly retrieverExists: ((row: PublicationRow) => Promise<boolean>) | undefined;

  /**
   * The row at this public name. A row kept in memory is checked against its retriever: deleting a retriever
   * deletes its publication in the database (foreign key), behind this store's back.
   */
  async row(publicName: string): Promise<PublicationRow | undefined> {
    const load = async () => {
      const found = await this.db<PublicationRow>('published_retrievers').where({ public_name: publicName }).first();
      return found ? deepFreeze(found) : undefined;
    };
    const row = await this.rows.read(publicName, load);
    if (row && this.rows.enabled && this.retrieverExists && !(await this.retrieverExists(row))) {
      this.rows.forgetAll();
      return load();
    }
    return row;
  }

  rowOf(organizationId: string, retrieverId: string): Promise<PublicationRow | undefined> {
    return this.db<PublicationRow>('published_retrievers').where({ organization_id: organizationId, retriever_id: retrieverId }).first();
  }

  rowById(publicationId: string): Promise<PublicationRow | undefined> {
    return this.db<PublicationRow>('published_retrievers').where({ publication_id: publicationId }).first();
  }

  async insert(row: PublicationRow): Promise<void> {
    try {
      await this.db('published_retrievers').insert(toColumns(row));
    } finally {
      this.rows.forgetAll();
    }
  }

  async update(publicationId: string, changes: Partial<PublicationRow>): Promise<void> {
    try {
      await this.db('published_retrievers').where({ publication_id: publicationId }).update(toColumns(changes));
    } finally {
      this.rows.forgetAll();
    }
  }

  async delete(publicationId: string): Promise<void> {
    try {
      await this.db('published_retrievers').where({ publication_id: publicationId }).delete();
    } finally {
      this.rows.forgetAll();
    }
  }

  async listOrganization(organizationId: string, limit: number, offset: number, namespaceId?: string): Promise<{ rows: PublicationRow[]; total: number }> {
    const q = this.db<PublicationRow>('published_retrievers').where({ organization_id: organizationId });
    if (namespaceId !== undefined) q.where({ namespace_id: namespaceId });
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
