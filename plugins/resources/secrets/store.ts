/**
 * The organization_secrets table. Values are sealed on the way in and opened only for values(): every
 * statement names the organization, so another organization's secret is never found.
 */
import type { Knex } from 'knex';
import type { OrganizationSecrets } from '../../../kernel/organization-secrets.js';
import type { SecretBox } from '../../../kernel/secret-box.js';

export interface SecretRow {
  organization_id: string;
  name: string;
  value: string;
  description: string | null;
  created_by: string | null;
  created_at: Date;
  updated_at: Date;
}

export type SecretSummary = Omit<SecretRow, 'value' | 'organization_id'>;

const SUMMARY_COLUMNS = ['name', 'description', 'created_by', 'created_at', 'updated_at'] as const;

export class SecretStore implements OrganizationSecrets {
  constructor(
    private readonly db: Knex,
    private readonly box: SecretBox,
  ) {}

  /** False when the name is taken. */
  async insert(row: Omit<SecretRow, 'value'> & { value: string }): Promise<boolean> {
    const inserted = await this.db('organization_secrets')
      .insert({ ...row, value: this.box.seal(row.value) })
      .onConflict(['organization_id', 'name'])
      .ignore()
      .returning('name');
    return inserted.length > 0;
  }

  async replace(organizationId: string, name: string, value: string, description: string | null | undefined, now: Date): Promise<SecretSummary | undefined> {
    const [row] = await this.db('organization_secrets')
      .where({ organization_id: organizationId, name })
      .update({ value: this.box.seal(value), updated_at: now, ...(description !== undefined ? { description } : {}) })
      .returning([...SUMMARY_COLUMNS]);
    return row as SecretSummary | undefined;
  }

  async get(organizationId: string, name: string): Promise<SecretSummary | undefined> {
    return (await this.db('organization_secrets').where({ organization_id: organizationId, name }).first([...SUMMARY_COLUMNS])) as SecretSummary | undefined;
  }

  async list(organizationId: string): Promise<SecretSummary[]> {
    return (await this.db('organization_secrets').where({ organization_id: organizationId }).orderBy('name').select([...SUMMARY_COLUMNS])) as SecretSummary[];
  }

  async delete(organizationId: string, name: string): Promise<boolean> {
    return (await this.db('organization_secrets').where({ organization_id: organizationId, name }).delete().returning('name')).length > 0;
  }

  async names(organizationId: string): Promise<string[]> {
    return (await this.list(organizationId)).map((row) => row.name);
  }

  async values(organizationId: string, names: readonly string[]): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    if (names.length === 0) return found;
    const rows = (await this.db('organization_secrets').where({ organization_id: organizationId }).whereIn('name', [...names]).select('name', 'value')) as Array<{ name: string; value: string }>;
    // A value this deployment cannot open (another deployment's signing secret) counts as missing.
    for (const row of rows) {
      try {
        found.set(row.name, this.box.open(row.value));
      } catch {
        continue;
      }
    }
    return found;
  }
}
