/**
 * Organizations and their users. The first start creates one organization with an owner and the
 * protected `admin-key`; `tessera orgs create` adds more the same way.
 */
import type { Knex } from 'knex';
import { newId } from '../ids.js';
import type { Clock } from '../clock.js';
import { KeyStore, type KeyRecord } from './key-store.js';
import { generateKeySecret, isAcceptableOperatorKey } from './keys.js';

export interface OrganizationRow {
  organization_id: string;
  name: string;
  created_at: Date;
}

export interface UserRow {
  user_id: string;
  organization_id: string;
  email: string;
  name: string | null;
  role: 'owner' | 'member';
  created_at: Date;
  deleted_at: Date | null;
}

export const ADMIN_KEY_NAME = 'admin-key';
const BOOTSTRAP_LOCK = 7_270_001;

export interface NewOrganizationInput {
  name: string;
  ownerEmail: string;
  /** Use this plaintext for the admin-key instead of generating one. */
  adminKeyPlaintext?: string | undefined;
}

export interface NewOrganization {
  organization: OrganizationRow;
  owner: UserRow;
  adminKey: KeyRecord;
  /** The admin-key plaintext: show it once, then it is gone. */
  adminKeyPlaintext: string;
}

export class TenantStore {
  constructor(
    private readonly db: Knex,
    private readonly keys: KeyStore,
    private readonly clock: Clock,
  ) {}

  private operatorOrganization: string | undefined;

  /**
   * The organization the first start created: its admins operate the deployment (they see the health
   * report's details). Read once: it never changes.
   */
  async firstOrganizationId(): Promise<string | undefined> {
    if (this.operatorOrganization) return this.operatorOrganization;
    const row = await this.db<OrganizationRow>('organizations').select('organization_id').orderBy([{ column: 'created_at' }, { column: 'organization_id' }]).first();
    this.operatorOrganization = row?.organization_id;
    return this.operatorOrganization;
  }

  async getOrganization(organizationId: string): Promise<OrganizationRow | undefined> {
    return this.db<OrganizationRow>('organizations').where({ organization_id: organizationId }).first();
  }

  /**
   * Creates the first organization unless one exists. Serialized with an advisory lock so two processes
   * starting together on one database create exactly one.
   */
  async bootstrapFirstOrganization(input: NewOrganizationInput): Promise<NewOrganization | undefined> {
    return this.db.transaction(async (trx) => {
      await trx.raw('select pg_advisory_xact_lock(?)', [BOOTSTRAP_LOCK]);
      const row = await trx('organizations').count<{ count: number }[]>({ count: '*' }).first();
      if (Number(row?.count ?? 0) > 0) return undefined;
      return this.insertOrganization(trx, input);
    });
  }

  /** Creates an organization, its owner and its protected admin-key in one transaction. */
  async createOrganization(input: NewOrganizationInput): Promise<NewOrganization> {
    return this.db.transaction((trx) => this.insertOrganization(trx, input));
  }

  private async insertOrganization(trx: Knex, input: NewOrganizationInput): Promise<NewOrganization> {
    const plaintext = input.adminKeyPlaintext ?? generateKeySecret('standard');
    if (input.adminKeyPlaintext !== undefined && !isAcceptableOperatorKey(plaintext)) {
      throw new Error('the admin key must be 24 to 200 printable characters without spaces');
    }
    {
      const now = this.clock.now();
      const organization: OrganizationRow = { organization_id: newId('org'), name: input.name, created_at: now };
      await trx('organizations').insert(organization);
      const owner: UserRow = {
        user_id: newId('user'),
        organization_id: organization.organization_id,
        email: input.ownerEmail.toLowerCase(),
        name: 'Owner',
        role: 'owner',
        created_at: now,
        deleted_at: null,
      };
      await trx('users').insert(owner);
      const adminKey = await this.keys.insert(trx, {
        organizationId: organization.organization_id,
        userId: owner.user_id,
        name: ADMIN_KEY_NAME,
        description: 'Protected organization admin key',
        plaintext,
        keyType: 'standard',
        permissions: ['admin'],
        scopes: [],
        rateLimitOverride: null,
        expiresAt: null,
        principalId: null,
        allowedOrigins: [],
        isProtected: true,
        createdBy: 'system',
      });
      return { organization, owner, adminKey, adminKeyPlaintext: plaintext };
    }
  }

  async findUser(organizationId: string, email: string, db: Knex = this.db): Promise<UserRow | undefined> {
    return db<UserRow>('users')
      .where({ organization_id: organizationId })
      .whereRaw('lower(email) = lower(?)', [email])
      .whereNull('deleted_at')
      .first();
  }
}
