/**
 * What a deleted namespace leaves behind, removed by the plugins that own it. Deleting a namespace commits
 * its row together with one durable purge task (so a crash after the delete loses nothing); the task runs
 * every registered purger in order — retrievers before the collections they read, collections before the
 * buckets they read — and is retried until all succeed. A purger must be idempotent: a retry runs it again.
 */
import type { Logger } from 'pino';

export interface NamespacePurgeTarget {
  organizationId: string;
  namespaceId: string;
  /** Who deleted the namespace (for audit entries the purge writes). */
  deletedBy: string | null;
}

/** Removes one kind of resource of the namespace; answers what it removed (counts, for the task's result). */
export type NamespacePurger = (target: NamespacePurgeTarget, log: Logger) => Promise<Record<string, number>>;

/** Purge order: smaller first. Readers go before what they read. */
export const PURGE_ORDER = { retrievers: 10, batches: 20, collections: 30, buckets: 40 } as const;

export class NamespacePurges {
  private readonly purgers: Array<{ name: string; order: number; purge: NamespacePurger }> = [];

  register(name: string, order: number, purge: NamespacePurger): void {
    if (this.purgers.some((p) => p.name === name)) throw new Error(`namespace purger '${name}' is registered twice`);
    this.purgers.push({ name, order, purge });
    this.purgers.sort((a, b) => a.order - b.order);
  }

  /** Runs every purger in order; the first failure stops the run (the task is retried from the start). */
  async purge(target: NamespacePurgeTarget, log: Logger): Promise<Record<string, Record<string, number>>> {
    const removed: Record<string, Record<string, number>> = {};
    for (const { name, purge } of this.purgers) removed[name] = await purge(target, log.child({ purger: name }));
    return removed;
  }
}
