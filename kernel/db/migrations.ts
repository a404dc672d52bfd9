/**
 * Per-plugin migrations run through knex's migrator. Each migration is named `<owner>/<name>`; owners
 * run in registration order (kernel first, then plugins as listed), and each owner's list in order.
 */
import type { Knex } from 'knex';

export interface Migration {
  name: string;
  up(db: Knex): Promise<void>;
  down?(db: Knex): Promise<void>;
}

export interface MigrationSet {
  owner: string;
  migrations: readonly Migration[];
}

export async function runMigrations(db: Knex, sets: readonly MigrationSet[]): Promise<string[]> {
  const all = sets.flatMap((set) =>
    set.migrations.map((m) => ({ ...m, name: `${set.owner}/${m.name}` })),
  );
  const names = new Set<string>();
  for (const m of all) {
    if (names.has(m.name)) throw new Error(`migration ${m.name} is defined twice`);
    names.add(m.name);
  }
  const source: Knex.MigrationSource<(typeof all)[number]> = {
    getMigrations: async () => all,
    getMigrationName: (m) => m.name,
    getMigration: async (m) => ({
      up: (k: Knex) => m.up(k),
      down: (k: Knex) => (m.down ? m.down(k) : Promise.resolve()),
    }),
  };
  const [, applied] = (await db.migrate.latest({
    migrationSource: source,
    tableName: 'tessera_migrations',
  })) as [number, string[]];
  return applied;
}
