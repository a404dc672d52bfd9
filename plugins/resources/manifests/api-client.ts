/**
 * This service's own HTTP API, called in process over loopback with the caller's Authorization: every
 * creation a manifest makes goes through the same validation, permission, scope, limit and event path as a
 * direct request would, and counts in the key's usage as one.
 */
import { ServiceUnavailableError } from '../../../kernel/errors.js';
import type { Json } from './entries.js';

export interface ApiAnswer {
  status: number;
  body: Json | undefined;
}

export class LoopbackApi {
  private calls = 0;

  constructor(
    private readonly baseUrl: string,
    private readonly authorization: string,
    /** The manifest request's id: each call carries `<id>.<n>`, so the request log ties them together. */
    private readonly requestId: string,
  ) {
    if (!baseUrl) throw new ServiceUnavailableError('The API is not listening yet');
  }

  async call(method: string, path: string, options: { namespace?: string; body?: unknown } = {}): Promise<ApiAnswer> {
    const headers: Record<string, string> = {
      Authorization: this.authorization,
      'X-Request-ID': `${this.requestId.slice(0, 80)}.${++this.calls}`,
    };
    if (options.namespace !== undefined) headers['X-Namespace'] = options.namespace;
    if (options.body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers,
      ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
    });
    const text = await res.text();
    let body: Json | undefined;
    try {
      body = text ? (JSON.parse(text) as Json) : undefined;
    } catch {
      body = undefined;
    }
    return { status: res.status, body };
  }

  get(path: string, namespace?: string): Promise<ApiAnswer> {
    return this.call('GET', path, namespace !== undefined ? { namespace } : {});
  }
}

/** A path segment, encoded. */
export function seg(value: string): string {
  return encodeURIComponent(value);
}

/** What an API error answer said: status, type and message (for ErrorResponse and HTTPValidationError bodies). */
export function errorOf(answer: ApiAnswer): { status: number; type: string; message: string } {
  const body = answer.body ?? {};
  const error = body.error as { type?: string; message?: string } | undefined;
  if (error) return { status: answer.status, type: error.type ?? 'Error', message: error.message ?? '' };
  const detail = body.detail as Array<{ loc?: unknown[]; msg?: string }> | undefined;
  if (Array.isArray(detail)) {
    return { status: answer.status, type: 'ValidationError', message: detail.map((d) => `${(d.loc ?? []).join('.')}: ${d.msg ?? ''}`).join('; ') };
  }
  return { status: answer.status, type: 'Error', message: `answered ${answer.status}` };
}
