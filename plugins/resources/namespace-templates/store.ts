/** Template rows, always read and written within one organization, with their source namespace's current name. */
import type { Knex } from 'knex';

export interface TemplateRow {
  template_id: string;
  organization_id: string;
  template_name: string;
  description: string | null;
  source_namespace_id: string;
  created_by: string | null;
  created_at: Date;
  updated_at: Date;
}

/** A template as read: its source namespace's name, or null once that namespace was deleted. */
export interface TemplateView extends TemplateRow {
  source_namespace_name: string | null;
}

const TABLE = 'namespace_templates';

export class TemplateStore {
  constructor(private readonly db: Knex) {}

  /** Templates with their source's name (a left join: a deleted source leaves the template, inactive). */
  private views(organizationId: string): Knex.QueryBuilder {
    return this.db(`${TABLE} as t`)
      .leftJoin('namespaces as n', (on) => on.on('n.namespace_id', 't.source_namespace_id').andOn('n.organization_id', 't.organization_id'))
      .where('t.organization_id', organizationId)
      .select('t.*', 'n.namespace_name as source_namespace_name');
  }

  /** By `tmpl_` id or by name (case-insensitive), the id winning. */
  async find(organizationId: string, idOrName: string): Promise<TemplateView | undefined> {
    return this.views(organizationId)
      .where((q) => q.where('t.template_id', idOrName).orWhereRaw('lower(t.template_name) = lower(?)', [idOrName]))
      .orderByRaw('t.template_id = ? desc', [idOrName])
      .first();
  }

  async list(organizationId: string, search: string | undefined): Promise<TemplateView[]> {
    const q = this.views(organizationId).orderByRaw('lower(t.template_name)');
    if (search) q.whereRaw("t.template_name ilike ? escape '\\'", [`%${search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`]);
    return q;
  }

  async insert(row: TemplateRow): Promise<void> {
    await this.db(TABLE).insert(row);
  }

  async update(organizationId: string, templateId: string, changes: Partial<Pick<TemplateRow, 'template_name' | 'description' | 'updated_at'>>): Promise<void> {
    await this.db(TABLE).where({ organization_id: organizationId, template_id: templateId }).update(changes);
  }

  async delete(organizationId: string, templateId: string): Promise<void> {
    await this.db(TABLE).where({ organization_id: organizationId, template_id: templateId }).delete();
  }
}
