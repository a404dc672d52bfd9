/**
 * Who still uses a resource. A plugin whose resources depend on another's (collections reading a bucket)
 * registers a finder; the owner asks before deleting, and refuses unless forced.
 */
import type { ResourceType } from './auth/scopes.js';

export interface Reference {
  resource_type: ResourceType;
  resource_id: string;
  resource_name: string | null;
  relation: string;
  /** `force` does not override it (a saved retriever would be left running over nothing): remove the referrer first. */
  blocking?: boolean;
}

export type ReferenceFinder = (organizationId: string, resourceId: string) => Promise<Reference[]>;

export class ReferenceRegistry {
  private readonly finders = new Map<ResourceType, ReferenceFinder[]>();

  register(target: ResourceType, finder: ReferenceFinder): void {
    this.finders.set(target, [...(this.finders.get(target) ?? []), finder]);
  }

  async referencesTo(target: ResourceType, organizationId: string, resourceId: string): Promise<Reference[]> {
    const found = await Promise.all((this.finders.get(target) ?? []).map((f) => f(organizationId, resourceId)));
    return found.flat();
  }
}
