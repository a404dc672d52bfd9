import { pino, type Logger, type DestinationStream } from 'pino';
import pretty from 'pino-pretty';

export type { Logger };

/** `pretty`: coloured, human lines (a terminal); `json`: one JSON object per line (log collectors). */
export type LogFormat = 'json' | 'pretty';

/** LOG_FORMAT when given, else pretty on a terminal and JSON lines everywhere else. */
export function resolveLogFormat(requested: LogFormat | undefined, stdout: { isTTY?: boolean } = process.stdout): LogFormat {
  return requested ?? (stdout.isTTY ? 'pretty' : 'json');
}

// Fields whose whole value is a secret, wherever they appear (top level or one object down).
const SECRET_FIELDS = ['key', 'token', 'signature', 'secret', 'password', 'authorization', 'cookie', 'admin_key', 'api_key', 'headers'];
const SECRET_HEADERS = ['x-api-key', 'x-public-api-key', 'x-amz-signature', 'set-cookie'];
// Fields holding a URL or a request path: kept, minus the parts that authorize (query strings, passwords, blob tokens).
const URL_FIELDS = ['url', 'path', 'presigned_url', 'download_url', 'upload_url'];

const REDACTED = '[redacted]';
const REDACT_PATHS = [
  ...[...SECRET_FIELDS, ...URL_FIELDS].flatMap((field) => [field, `*.${field}`]),
  ...SECRET_HEADERS.flatMap((header) => [`["${header}"]`, `*["${header}"]`]),
];
const URL_FIELD_SET = new Set(URL_FIELDS);

/** A URL or path without what would let a reader of the log use it: query string, password, storage token. */
export function redactUrl(value: string): string {
  let text = value.replace(/(\/v1\/storage\/blobs\/)[^/?#\s]+/g, `$1${REDACTED}`).replace(/\?[^#\s]*/, `?${REDACTED}`);
  text = text.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@\s]+):[^@/\s]*@/i, `$1:${REDACTED}@`);
  return text;
}

function censor(value: unknown, path: string[]): unknown {
  const field = path[path.length - 1] ?? '';
  if (URL_FIELD_SET.has(field)) return typeof value === 'string' ? redactUrl(value) : value;
  return REDACTED;
}

/**
 * The root logger. Secrets never reach the stream: key, token, signature and header fields are
 * redacted, and URLs and paths lose their query strings and storage tokens.
 */
export function createLogger(level: string, destination?: DestinationStream, format: LogFormat = 'json'): Logger {
  const stream =
    format === 'pretty'
      ? pretty({
          ...(destination ? { destination } : { destination: 1 }),
          // A terminal is not a pipeline: write each line as it comes, so nothing is lost on exit.
          sync: true,
          translateTime: 'SYS:HH:MM:ss.l',
          // One line per entry, led by the component that wrote it: `INFO: [tasks] task failed {"task_id":...}`.
          singleLine: true,
          messageFormat: '{if component}[{component}] {end}{msg}',
          ignore: 'service,pid,hostname,component',
        })
      : (destination ?? pino.destination({ sync: false }));
  return pino(
    {
      level,
      base: { service: 'tessera' },
      redact: { paths: REDACT_PATHS, censor },
    },
    stream,
  );
}

/**
 * A logger made on first use. A child logger costs its bindings' serialization up front; on hot paths
 * (each request, each stage of an execution) most are never written to, so they are made only when they are.
 */
export function lazyLogger(make: () => Logger): Logger {
  let made: Logger | undefined;
  return new Proxy({} as Logger, {
    get(_target, property) {
      made ??= make();
      const value = Reflect.get(made, property, made) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(made) : value;
    },
    has(_target, property) {
      made ??= make();
      return property in made;
    },
  });
}
