/**
 * What the deployment holds, read through the API with the caller's key (so a key sees what it may see),
 * each lookup made once per request.
 */
import { NotAllowedError } from '../../../kernel/errors.js';
import { errorOf, seg, type ApiAnswer, type LoopbackApi } from './api-client.js';
import type { Json, ResourceKind } from './entries.js';

/** A lookup's outcome: the resource, absent, or not visible to this key (with the API's message). */
export type Lookup = { found: true; resource: Json } | { found: false; refused?: string };

const PATHS: Record<Exclude<ResourceKind, 'namespace'>, string> = {
  bucket: '/v1/buckets/',
  collection: '/v1/collections/',
  retriever: '/v1/retrievers/',
};

const PAGE = 1000;

export class Deployment {
  private readonly cache = new Map<string, Promise<Lookup>>();

  constructor(readonly api: LoopbackApi) {}

  namespace(name: string): Promise<Lookup> {
    return this.once(`namespace ${name.toLowerCase()}`, () => this.api.get(`/v1/namespaces/${seg(name)}`));
  }

  /** A bucket, collection or retriever of a namespace, by name or id. */
  resource(kind: Exclude<ResourceKind, 'namespace'>, namespace: string, name: string): Promise<Lookup> {
    return this.once(`${kind} ${namespace.toLowerCase()} ${name}`, async () => {
      const answer = await this.api.get(`${PATHS[kind]}${seg(name)}`, namespace);
      // A retriever answers inside an envelope.
      if (answer.status === 200 && kind === 'retriever') return { status: 200, body: answer.body?.retriever as Json };
      return answer;
    });
  }

  /** A resource's name from its name or id (ids as stored in sources and retrievers). */
  async nameOf(kind: 'bucket' | 'collection', namespace: string, idOrName: string): Promise<string> {
    const lookup = await this.resource(kind, namespace, idOrName);
    return lookup.found ? String(lookup.resource[`${kind}_name`]) : idOrName;
  }

  /** Every namespace the key may see. */
  async namespaces(): Promise<Json[]> {
    return this.all('/v1/namespaces');
  }

  async list(kind: Exclude<ResourceKind, 'namespace'>, namespace: string): Promise<Json[]> {
    return this.all(kind === 'collection' ? '/v1/collections' : kind === 'bucket' ? '/v1/buckets' : '/v1/retrievers', namespace);
  }

  private async all(path: string, namespace?: string): Promise<Json[]> {
    const out: Json[] = [];
    for (let offset = 0; ; offset += PAGE) {
      const answer = await this.api.get(`${path}?limit=${PAGE}&offset=${offset}`, namespace);
      if (answer.status !== 200) throw refusal(answer, `listing ${path}`);
      const results = (answer.body?.results ?? []) as Json[];
      out.push(...results);
      if (answer.body?.has_next !== true || results.length === 0) return out;
    }
  }

  private once(key: string, read: () => Promise<ApiAnswer>): Promise<Lookup> {
    let pending = this.cache.get(key);
    if (!pending) {
      pending = read().then((answer): Lookup => {
        if (answer.status === 200 && answer.body) return { found: true, resource: answer.body };
        if (answer.status === 404) return { found: false };
        return { found: false, refused: errorOf(answer).message };
      });
      this.cache.set(key, pending);
    }
    return pending;
  }
}

function refusal(answer: ApiAnswer, what: string): Error {
  const error = errorOf(answer);
  if (error.status === 403) return new NotAllowedError(error.message);
  return new Error(`${what} answered ${error.status}: ${error.message}`);
}
