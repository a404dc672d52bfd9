/**
 * Errors a person can act on: every failure a client command meets ends as one CliError line that says what
 * happened and what to do next (start the server, pass a key, pass --namespace, ...).
 */

/** A failure already phrased for the person at the terminal; `body` is the server's answer, printed with --json. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly hint?: string,
    readonly body?: unknown,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

function codeOf(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    // localhost tried over IPv4 and IPv6: an AggregateError holds each attempt's error.
    const inner = (e as { errors?: unknown[] }).errors?.[0] as { code?: unknown } | undefined;
    if (typeof inner?.code === 'string') return inner.code;
  }
  return undefined;
}

/** fetch() threw: the server could not be reached at all. */
export function unreachable(url: string, error: unknown): CliError {
  const code = codeOf(error);
  const origin = safeOrigin(url);
  if (code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === 'EHOSTUNREACH') {
    return new CliError(
      `cannot reach Tessera at ${origin} (${code === 'ECONNREFUSED' ? 'connection refused' : code}).`,
      `Is the server running at ${origin}? Start it with \`npm start\`, or point --url / TESSERA_URL at it.`,
    );
  }
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    return new CliError(`cannot resolve the host of ${origin}.`, 'Check --url / TESSERA_URL.');
  }
  const message = error instanceof Error ? error.message : String(error);
  return new CliError(`request to ${origin} failed: ${message}${code ? ` (${code})` : ''}.`, `Is the server running at ${origin}? Start it with \`npm start\`.`);
}

function safeOrigin(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return url;
  }
}

/** The message inside an ErrorResponse ({error: {message}}) or an HTTPValidationError ({detail: [{loc, msg}]}). */
export function messageOfBody(body: unknown): string | undefined {
  if (!body || typeof body !== 'object') return typeof body === 'string' && body ? body : undefined;
  const error = (body as { error?: { message?: unknown } }).error;
  if (error && typeof error.message === 'string') return error.message;
  const detail = (body as { detail?: unknown }).detail;
  if (Array.isArray(detail)) {
    return detail
      .slice(0, 5)
      .map((d: { loc?: unknown[]; msg?: string }) => `${Array.isArray(d.loc) ? d.loc.join('.') : ''}: ${d.msg ?? ''}`)
      .join('; ');
  }
  if (typeof detail === 'string') return detail;
  const message = (body as { message?: unknown }).message;
  return typeof message === 'string' ? message : undefined;
}

/** How the server says the X-Namespace namespace does not exist. */
export const NAMESPACE_NOT_FOUND = /^Namespace '.*' not found/;

/** A refused call (HTTP status ≥ 400) as a CliError with the next step for the usual causes. */
export function refused(status: number, body: unknown, context: { hasKey: boolean; namespace?: string | undefined }): CliError {
  const message = messageOfBody(body) ?? 'no details';
  let hint: string | undefined;
  if (status === 401) {
    hint = context.hasKey
      ? 'The key was not accepted (wrong, revoked or expired): pass another with --key or TESSERA_API_KEY.'
      : 'No API key was sent: pass --key <key> or set TESSERA_API_KEY (the admin-key is printed once, when the server first starts).';
  } else if (status === 403) {
    hint = "This key may not do that: use a key with the needed permission (see `tessera me`), or ask an admin for one.";
  } else if (status === 404 && NAMESPACE_NOT_FOUND.test(message)) {
    hint = context.namespace
      ? `Check --namespace / TESSERA_NAMESPACE ('${context.namespace}'); \`tessera namespaces list\` shows them, \`tessera namespaces create <name>\` makes one.`
      : 'Pass --namespace <name> or set TESSERA_NAMESPACE.';
  } else if (status === 409) {
    // A refused request changed nothing: say so, and what to look at.
    hint = /already exists/i.test(message)
      ? 'Nothing was changed: use the existing one (the list and get commands show it), or choose another name.'
      : 'Nothing was changed: its current state does not allow this (see above); the get command shows that state.';
  } else if (status === 429) {
    hint = 'Rate limited: wait a little and try again.';
  } else if (status >= 500) {
    hint = 'The server failed: its log says why.';
  }
  return new CliError(`${status} ${reason(status)}: ${message}`, hint, body);
}

function reason(status: number): string {
  const reasons: Record<number, string> = {
    400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 409: 'Conflict', 413: 'Too Large',
    422: 'Invalid', 429: 'Too Many Requests', 500: 'Server Error', 502: 'Bad Gateway', 503: 'Unavailable',
  };
  return reasons[status] ?? 'Error';
}

export function missingNamespace(): CliError {
  return new CliError(
    'this command works inside a namespace, and none was given.',
    'Pass --namespace <name> or set TESSERA_NAMESPACE (`tessera namespaces list` shows them).',
  );
}
