/**
 * What other plugins undo when a retriever is deleted. The retrievers plugin deletes the row (its
 * publication, executions and interactions go with it) and revokes its own organization's keys; what lives
 * elsewhere — e.g. other organizations' marketplace subscriptions to it — is ended by the plugin that owns
 * it, through a hook registered here. Hooks run after the delete committed, in registration order. Each must
 * be idempotent: a namespace purge that failed half way runs them again.
 */

export interface RemovedRetriever {
  organizationId: string;
  retrieverId: string;
  /** Who deleted it (the namespace's deleter for a purge); null when unknown. */
  deletedBy: string | null;
  /** The request that deleted it, for audit entries; absent for a purge task. */
  requestId?: string;
}

/** Ends what the plugin holds for the removed retrievers; answers how many things it ended. */
export type RetrieverRemovalHook = (removed: readonly RemovedRetriever[]) => Promise<number>;

export class RetrieverRemovals {
  private readonly hooks: Array<{ name: string; hook: RetrieverRemovalHook }> = [];

  register(name: string, hook: RetrieverRemovalHook): void {
    if (this.hooks.some((h) => h.name === name)) throw new Error(`retriever removal hook '${name}' is registered twice`);
    this.hooks.push({ name, hook });
  }

  /** Runs every hook; the first failure is thrown (the caller's task, if any, is retried). Counts by hook. */
  async removed(removed: readonly RemovedRetriever[]): Promise<Record<string, number>> {
    const ended: Record<string, number> = {};
    if (removed.length === 0) return ended;
    for (const { name, hook } of this.hooks) ended[name] = await hook(removed);
    return ended;
  }
}
