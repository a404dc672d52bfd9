/** `me`, `health`, `users`, `keys` and `namespaces`: who is calling, and the organization's people, keys and namespaces. */
import type { Command } from 'commander';
import { call, clientCommand, clientOf, jsonFlag, list, type ClientOptions } from './context.js';
import type { components } from '../../generated/openapi.js';
import { unreachable } from './errors.js';
import { emit, printFields, printTable, shortTime } from './output.js';

type HealthResponse = components['schemas']['HealthResponse'];

/** The health report; a 503 carries one too (which component is down, and why), so it is shown rather than refused. */
async function healthReport(o: ClientOptions): Promise<HealthResponse> {
  const answer = await clientOf(o)
    .GET('/v1/health', {})
    .catch((err: unknown) => {
      throw unreachable(o.url, err);
    });
  if (answer.response.status === 503 && answer.error && 'components' in answer.error) return answer.error;
  return call(o, Promise.resolve(answer));
}

type Permission = 'read' | 'write' | 'delete' | 'admin';

export function registerAccount(program: Command): void {
  clientCommand(program, 'me', 'Show the calling key, its organization and capabilities').action(async (o: ClientOptions) => {
    const me = await call(o, clientOf(o).GET('/v1/me', {}));
    emit(o, me, (m) => {
      if ('bound_retriever' in m) {
        const r = m.bound_retriever;
        printFields({}, [
          ['key', `${m.key.key_prefix} (${m.key.key_type})`],
          ['executes', r.public_name ?? '(its retriever is not published)'],
          ['endpoints', r.allowed_endpoints.join(', ')],
          ...(m.key.expires_at ? ([['expires', shortTime(m.key.expires_at)]] as Array<[string, unknown]>) : []),
        ]);
        return;
      }
      printFields({}, [
        ['organization', `${m.organization.name} (${m.organization.organization_id})`],
        ['user', `${m.user.email} (${m.user.user_id})`],
        ['key', `${m.key.name} (${m.key.key_prefix}, ${m.key.key_type})`],
        ['permissions', m.capabilities.effective_permissions.join(', ')],
        ['scopes', m.capabilities.organization_wide ? 'organization-wide' : m.key.scopes],
        ...(m.key.principal_id ? ([['principal', m.key.principal_id]] as Array<[string, unknown]>) : []),
        ...(m.key.expires_at ? ([['expires', shortTime(m.key.expires_at)]] as Array<[string, unknown]>) : []),
        ...(m.namespace ? ([['namespace', m.namespace.namespace_name]] as Array<[string, unknown]>) : []),
      ]);
    });
  });

  clientCommand(program, 'health', 'Show the health of every backing component (exit status 1 when one is down)').action(async (o: ClientOptions) => {
    const health = await healthReport(o);
    if (health.status === 'down') process.exitCode = 1;
    emit(o, health, (h) => {
      process.stdout.write(`status ${h.status}, version ${h.version}, up ${Math.round(h.uptime_seconds)}s\n`);
      printTable(Object.entries(h.components), [
        { header: 'component', value: ([name]) => name },
        { header: 'status', value: ([, c]) => c.status },
        { header: 'kind', value: ([, c]) => c.kind },
        { header: 'latency ms', value: ([, c]) => (c.latency_ms === null ? '' : c.latency_ms.toFixed(1)), right: true },
        { header: 'error', value: ([, c]) => c.error },
      ]);
    });
  });

  const users = program.command('users').description('Users of the organization');
  clientCommand(users, 'list', 'List users').action(async (o: ClientOptions) => {
    const page = await call(o, clientOf(o).GET('/v1/organizations/users', {}));
    emit(o, page, (p) =>
      printTable(p.results, [
        { header: 'email', value: (u) => u.email },
        { header: 'name', value: (u) => u.name },
        { header: 'role', value: (u) => u.role },
        { header: 'keys', value: (u) => u.active_key_count, right: true },
        { header: 'created', value: (u) => shortTime(u.created_at) },
      ], `${p.total} user(s)`),
    );
  });
  clientCommand(users, 'create', 'Add a user')
    .argument('<email>')
    .option('--name <name>')
    .action(async (email: string, o: ClientOptions & { name?: string }) => {
      const user = await call(o, clientOf(o).POST('/v1/organizations/users', { body: { email, ...(o.name ? { name: o.name } : {}) } }));
      emit(o, user, (u) => printFields(u, ['email', 'name', 'role', 'user_id', 'created_at']));
    });
  clientCommand(users, 'delete', 'Remove a user and revoke their keys')
    .argument('<email>')
    .action(async (email: string, o: ClientOptions) => {
      const deleted = await call(o, clientOf(o).DELETE('/v1/organizations/users/{user_email}', { params: { path: { user_email: email } } }));
      emit(o, deleted, (d) => process.stdout.write(`deleted ${d.email}; revoked ${d.revoked_key_ids.length} key(s)\n`));
    });

  const keys = program.command('keys').description('API keys of a user (needs an admin key)');
  clientCommand(keys, 'list', "List a user's keys")
    .requiredOption('--user <email>')
    .option('--include-revoked')
    .action(async (o: ClientOptions & { user: string; includeRevoked?: boolean }) => {
      const page = await call(
        o,
        clientOf(o).GET('/v1/organizations/users/{user_email}/api-keys', {
          params: { path: { user_email: o.user }, query: { include_revoked: Boolean(o.includeRevoked) } },
        }),
      );
      emit(o, page, (p) =>
        printTable(p.results, [
          { header: 'name', value: (k) => k.name },
          { header: 'prefix', value: (k) => k.key_prefix },
          { header: 'type', value: (k) => k.key_type },
          { header: 'permissions', value: (k) => k.permissions.join(',') },
          { header: 'status', value: (k) => k.status },
          { header: 'expires', value: (k) => shortTime(k.expires_at) },
          { header: 'created', value: (k) => shortTime(k.created_at) },
        ], `${p.total} key(s)`),
      );
    });
  clientCommand(keys, 'create', 'Create a key; prints its secret once')
    .requiredOption('--user <email>')
    .requiredOption('--name <name>')
    .option('--description <text>')
    .option('--permissions <list>', 'comma-separated: read,write,delete,admin', list)
    .option('--origins <list>', 'comma-separated allowed origins', list)
    .option('--expires-at <iso>')
    .option('--principal-id <id>', 'makes a user-scoped usr_sk_ key')
    .option('--rate-limit <perMinute>', 'requests per minute', (v) => Number(v))
    .option('--scopes <json>', 'ResourceScope[] as JSON', jsonFlag('--scopes'))
    .action(
      async (
        o: ClientOptions & {
          user: string;
          name: string;
          description?: string;
          permissions?: Permission[];
          origins?: string[];
          expiresAt?: string;
          principalId?: string;
          rateLimit?: number;
          scopes?: never;
        },
      ) => {
        const created = await call(
          o,
          clientOf(o).POST('/v1/organizations/users/{user_email}/api-keys', {
            params: { path: { user_email: o.user } },
            body: {
              name: o.name,
              ...(o.description ? { description: o.description } : {}),
              ...(o.permissions ? { permissions: o.permissions } : {}),
              ...(o.origins ? { allowed_origins: o.origins } : {}),
              ...(o.expiresAt ? { expires_at: o.expiresAt } : {}),
              ...(o.principalId ? { principal_id: o.principalId } : {}),
              ...(o.rateLimit ? { rate_limit_override: o.rateLimit } : {}),
              ...(o.scopes ? { scopes: o.scopes } : {}),
            },
          }),
        );
        emit(o, created, (k) => printSecret(k));
      },
    );
  clientCommand(keys, 'rotate', 'Issue a new secret; the old one stops working at once')
    .requiredOption('--user <email>')
    .requiredOption('--name <name>')
    .action(async (o: ClientOptions & { user: string; name: string }) => {
      const rotated = await call(
        o,
        clientOf(o).POST('/v1/organizations/users/{user_email}/api-keys/{key_name}/rotate', {
          params: { path: { user_email: o.user, key_name: o.name } },
        }),
      );
      emit(o, rotated, (k) => printSecret(k));
    });
  clientCommand(keys, 'revoke', 'Revoke a key')
    .requiredOption('--user <email>')
    .requiredOption('--name <name>')
    .option('--force', 'revoke even if the key was used recently')
    .action(async (o: ClientOptions & { user: string; name: string; force?: boolean }) => {
      const revoked = await call(
        o,
        clientOf(o).DELETE('/v1/organizations/users/{user_email}/api-keys/{key_name}', {
          params: { path: { user_email: o.user, key_name: o.name }, query: { force: Boolean(o.force) } },
        }),
      );
      emit(o, revoked, () => process.stdout.write(`revoked ${o.name} of ${o.user}\n`));
    });

  const namespaces = program.command('namespaces').description('Namespaces');
  clientCommand(namespaces, 'list', 'List namespaces').action(async (o: ClientOptions) => {
    const page = await call(o, clientOf(o).GET('/v1/namespaces', {}));
    emit(o, page, (p) =>
      printTable(p.results, [
        { header: 'name', value: (n) => n.namespace_name },
        { header: 'id', value: (n) => n.namespace_id },
        { header: 'description', value: (n) => n.description },
        { header: 'created', value: (n) => shortTime(n.created_at) },
      ], `${p.total} namespace(s)`),
    );
  });
  clientCommand(namespaces, 'create', 'Create a namespace')
    .argument('<name>')
    .option('--description <text>')
    .action(async (name: string, o: ClientOptions & { description?: string }) => {
      const created = await call(
        o,
        clientOf(o).POST('/v1/namespaces', { body: { namespace_name: name, ...(o.description ? { description: o.description } : {}) } }),
      );
      emit(o, created, (n) => printFields(n, ['namespace_name', 'namespace_id', 'description', 'created_at']));
    });
  clientCommand(namespaces, 'delete', 'Delete a namespace')
    .argument('<name>')
    .action(async (name: string, o: ClientOptions) => {
      const deleted = await call(o, clientOf(o).DELETE('/v1/namespaces/{name}', { params: { path: { name } } }));
      emit(o, deleted, (d) => process.stdout.write(`deleted namespace ${d.namespace_name} (${d.namespace_id})\n`));
    });
}

/** A key with its secret: the secret on a line of its own, since it is shown only this once. */
function printSecret(k: { key: string; name: string; key_id: string; permissions: string[]; key_type: string; expires_at?: string | null }): void {
  printFields({}, [
    ['name', k.name],
    ['key_id', k.key_id],
    ['type', k.key_type],
    ['permissions', k.permissions.join(', ')],
    ['expires', shortTime(k.expires_at ?? null) || 'never'],
  ]);
  process.stdout.write(`\nThe secret is shown only this once; store it now:\n\n  ${k.key}\n\n`);
}
