/**
 * Why the service could not start, in one line an operator can act on. The CLI prints a StartupError's
 * message alone (no stack trace); the translators below turn the low-level errors of the backing
 * components (PostgreSQL, NATS, the listening socket) into one.
 */

export class StartupError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StartupError';
  }
}

function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The URL without its password, for messages. */
export function displayUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString().replace(/\/$/, '');
  } catch {
    return '(an unparsable URL)';
  }
}

/** A failure to open DATABASE_URL (node-postgres errors: socket codes and SQLSTATEs). */
export function databaseStartupError(error: unknown, url: string): StartupError {
  const at = displayUrl(url);
  let database = '';
  try {
    database = decodeURIComponent(new URL(url).pathname.slice(1));
  } catch {
    // displayUrl already says the URL is unparsable.
  }
  const code = codeOf(error);
  const reason = (() => {
    switch (code) {
      case 'ECONNREFUSED':
        return `cannot reach PostgreSQL at ${at} (connection refused). Start PostgreSQL, or fix DATABASE_URL (unset it to use the embedded database).`;
      case 'ENOTFOUND':
      case 'EAI_AGAIN':
        return `cannot reach PostgreSQL at ${at} (unknown host). Fix the host in DATABASE_URL.`;
      case 'ETIMEDOUT':
        return `cannot reach PostgreSQL at ${at} (timed out). Check the host, port and firewall in DATABASE_URL.`;
      case '3D000':
        return `database "${database}" does not exist on ${at}. Create it (createdb ${database || 'tessera'}) or fix DATABASE_URL.`;
      case '28000':
      case '28P01':
        return `PostgreSQL at ${at} refused the login: ${messageOf(error)}. Fix the user or password in DATABASE_URL.`;
      default:
        return undefined;
    }
  })();
  return new StartupError(reason ?? `cannot open the database at ${at}: ${messageOf(error)}. Check DATABASE_URL.`, { cause: error });
}

/** A failure to connect to NATS_URL or to use its JetStream. */
export function natsStartupError(error: unknown, url: string): StartupError {
  const at = displayUrl(url);
  const code = codeOf(error);
  const message = messageOf(error);
  if (code === 'CONNECTION_REFUSED' || code === 'ECONNREFUSED') {
    return new StartupError(`cannot reach NATS at ${at} (connection refused). Start nats-server -js, or unset NATS_URL to use the in-process bus.`, { cause: error });
  }
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    return new StartupError(`cannot reach NATS at ${at} (unknown host). Fix the host in NATS_URL.`, { cause: error });
  }
  if (/jetstream/i.test(message) || code === '503') {
    return new StartupError(`NATS at ${at} has no JetStream: ${message}. Start nats-server with -js (JetStream enabled).`, { cause: error });
  }
  return new StartupError(`cannot use NATS at ${at}: ${message}. Check NATS_URL, or unset it to use the in-process bus.`, { cause: error });
}

/** A failure to listen on HOST:PORT. */
export function listenStartupError(error: unknown, host: string, port: number): StartupError {
  const code = codeOf(error);
  if (code === 'EADDRINUSE') {
    return new StartupError(`port ${port} is in use on ${host}; stop what uses it, or set PORT to another port (PORT=0 picks a free one).`, { cause: error });
  }
  if (code === 'EACCES') {
    return new StartupError(`not allowed to listen on port ${port} (ports below 1024 need privileges); set PORT to 1024 or above.`, { cause: error });
  }
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') {
    return new StartupError(`cannot listen on host ${host}: it is not an address of this machine. Fix HOST (0.0.0.0 listens on every interface).`, { cause: error });
  }
  return new StartupError(`cannot listen on ${host}:${port}: ${messageOf(error)}`, { cause: error });
}
