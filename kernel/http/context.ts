import type { Logger } from 'pino';
import type { Response } from 'express';
import type { AuthContext, PresentedKey } from '../auth/authenticator.js';
import type { ResolvedNamespace } from '../auth/namespaces.js';
import type { OperationSpec } from './operations.js';

/** What the kernel knows about a request by the time a handler runs. */
export interface RequestContext {
  requestId: string;
  log: Logger;
  startedAt: bigint;
  operation: OperationSpec | undefined;
  pathParams: Record<string, string>;
  /** Null on public operations. */
  auth: AuthContext | null;
  /** The real key a refused request presented (expired, wrong origin, ...): its usage counts the refusal. */
  presentedKey?: PresentedKey;
  /** The namespace of X-Namespace, resolved and scope-checked; null when the request names none. */
  namespace: ResolvedNamespace | null;
  /** Credits this request consumed (recorded in the request log). */
  credits: number;
  /**
   * Set when the JSON body's text has no `\u` escape: its strings then hold only what UTF-8 bytes can
   * spell, never U+0000 or a lone surrogate, and the walk looking for them is skipped (body-checks.ts).
   */
  bodyWithoutEscapes?: boolean;
}

export function contextOf(res: Response): RequestContext {
  return res.locals.ctx as RequestContext;
}
