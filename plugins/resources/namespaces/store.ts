/** Namespace rows, always read and written within one organization. */
import type { Knex } from 'knex';
import type { ResolvedNamespace, NamespaceResolver } from '../../../kernel/auth/namespaces.js';
import type { EventBus } from '../../../kernel/events/event-bus.js';

export interface NamespaceRow {
  namespace_id: string;
  organization_id: string;
  namespace_name: string;
  description: string | null;
  metadata: Record<string, unknown>;
  feature_extractors: Array<{ name: string; version?: string }>;
  created_by: string | null;
  created_at: Date;
  updated_at: Date;
}

export class NamespaceStore {
  constructor(private readonly db: Knex) {}

  /** By `ns_` id or by name (case-insensitive). */
  async find(organizationId: string, nameOrId: string, db: Knex = this.db): Promise<NamespaceRow | undefined> {
    return this.byNameOrId(db, organizationId, nameOrId).first();
  }

  /** Only the id and name (what resolving `X-Namespace` needs): never the metadata. */
  async findName(organizationId: string, nameOrId: string): Promise<Pick<NamespaceRow, 'namespace_id' | 'namespace_name'> | undefined> {
    return this.byNameOrId(this.db, organizationId, nameOrId).first('namespace_id', 'namespace_name');
  }

  private byNameOrId(db: Knex, organizationId: string, nameOrId: string): Knex.QueryBuilder<NamespaceRow> {
    return db<NamespaceRow>('namespaces')
      .where({ organization_id: organizationId })
      .where((q) => q.where({ namespace_id: nameOrId }).orWhereRaw('lower(namespace_name) = lower(?)', [nameOrId]))
      .orderByRaw('namespace_id = ? desc', [nameOrId]);
  }

  /** Ids and names of the organization's namespaces, by name (a list filters these, then reads only its page). */
  async listNames(organizationId: string, search: string | undefined): Promise<Array<Pick<NamespaceRow, 'namespace_id' | 'namespace_name'>>> {
    const q = this.db<NamespaceRow>('namespaces').where({ organization_id: organizationId }).orderByRaw('lower(namespace_name)').select('namespace_id', 'namespace_name');
    if (search) q.whereRaw("namespace_name ilike ? escape '\\'", [`%${search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`]);
    return q;
  }

  /** Whole rows of these namespaces, in the order of `ids`. */
  async rows(organizationId: string, ids: readonly string[]): Promise<NamespaceRow[]> {
    if (ids.length === 0) return [];
    const found = (await this.db<NamespaceRow>('namespaces').where({ organization_id: organizationId }).whereIn('namespace_id', [...ids])) as NamespaceRow[];
    const byId = new Map(found.map((row) => [row.namespace_id, row]));
    return ids.flatMap((id) => byId.get(id) ?? []);
  }

  async insert(db: Knex, row: NamespaceRow): Promise<void> {
    await db('namespaces').insert({
      ...row,
      metadata: JSON.stringify(row.metadata),
      feature_extractors: JSON.stringify(row.feature_extractors),
    });
  }

  async update(db: Knex, row: NamespaceRow): Promise<void> {
    await db('namespaces')
      .where({ organization_id: row.organization_id, namespace_id: row.namespace_id })
      .update({
        namespace_name: row.namespace_name,
        description: row.description,
        metadata: JSON.stringify(row.metadata),
        feature_extractors: JSON.stringify(row.feature_extractors),
        updated_at: row.updated_at,
      });
  }

  async delete(db: Knex, organizationId: string, namespaceId: string): Promise<void> {
    await db('namespaces').where({ organization_id: organizationId, namespace_id: namespaceId }).delete();
  }
}

/**
 * Resolves `X-Namespace` on every namespace-scoped request. Results are cached briefly; any namespace
 * change (from any process, via the event bus) drops the organization's cached entries.
 */
export class CachedNamespaceResolver implements NamespaceResolver {
  private readonly cache = new Map<string, { value: ResolvedNamespace; until: number }>();

  constructor(
    private readonly store: NamespaceStore,
    private readonly ttlMs: number,
  ) {}

  listen(events: EventBus): () => void {
    return events.subscribe('namespace.*', (event) => this.forget(event.organization_id));
  }

  forget(organizationId: string): void {
    for (const key of this.cache.keys()) if (key.startsWith(`${organizationId}\u0000`)) this.cache.delete(key);
  }

  async resolve(organizationId: string, nameOrId: string): Promise<ResolvedNamespace | undefined> {
    const key = `${organizationId}\u0000${nameOrId}`;
    const hit = this.cache.get(key);
    if (hit && hit.until > Date.now()) return hit.value;
    const row = await this.store.findName(organizationId, nameOrId);
    if (!row) return undefined;
    const value = { id: row.namespace_id, name: row.namespace_name };
    if (this.ttlMs > 0) this.cache.set(key, { value, until: Date.now() + this.ttlMs });
    return value;
  }
}
