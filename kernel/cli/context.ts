/**
 * What every client command shares: --url, --key, --namespace and --json (each with its environment
 * variable), the typed client over them, and `call`, which turns a refused or unreachable call into a
 * CliError that says what to do.
 */
import { Command, Option } from 'commander';
import { createTesseraClient, type TesseraClient } from '../../generated/client.js';
import { CliError, missingNamespace, refused, unreachable } from './errors.js';
import { nodeFetch } from './http.js';

export interface ClientOptions {
  url: string;
  key?: string;
  namespace?: string;
  json?: boolean;
}

export const DEFAULT_URL = 'http://localhost:8080';

/** A subcommand of `parent` that talks to a running server. */
export function clientCommand(parent: Command, name: string, description: string): Command {
  return parent
    .command(name)
    .description(description)
    .addOption(new Option('--url <url>', 'Tessera base URL').env('TESSERA_URL').default(DEFAULT_URL))
    .addOption(new Option('--key <key>', 'API key').env('TESSERA_API_KEY'))
    .addOption(new Option('--namespace <ns>', 'namespace (X-Namespace)').env('TESSERA_NAMESPACE'))
    .option('--json', 'print the JSON the API answered, for scripts');
}

export function clientOf(options: ClientOptions): TesseraClient {
  return createTesseraClient({
    baseUrl: options.url.replace(/\/+$/, ''),
    ...(options.key ? { apiKey: options.key } : {}),
    ...(options.namespace ? { namespace: options.namespace } : {}),
    fetch: nodeFetch,
  });
}

/** The namespace a namespaced command needs, or a CliError saying how to give one. */
export function namespaceOf(options: ClientOptions): string {
  if (!options.namespace) throw missingNamespace();
  return options.namespace;
}

type Answer<T> = { data?: T; error?: unknown; response: Response };

/** The body of a successful call; a CliError for anything else. */
export async function call<T>(options: ClientOptions, request: Promise<Answer<T>>): Promise<T> {
  let answer: Answer<T>;
  try {
    answer = await request;
  } catch (err) {
    throw unreachable(options.url, err);
  }
  if (answer.error !== undefined || !answer.response.ok) {
    throw refused(answer.response.status, answer.error, { hasKey: Boolean(options.key), namespace: options.namespace });
  }
  return answer.data as T;
}

/** Comma-separated list flag values. */
export const list = (value: string): string[] =>
  value
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean);

/** Repeatable flag values, collected in order. */
export const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

/**
 * `key=value` pairs (repeatable flags) as an object: the value is text; `key:=json` takes a JSON value
 * (numbers, booleans, arrays, objects).
 */
export function pairsToObject(pairs: readonly string[], flag: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const pair of pairs) {
    const json = /^([^=:]+):=(.*)$/s.exec(pair);
    if (json) {
      try {
        out[json[1]!.trim()] = JSON.parse(json[2]!) as unknown;
      } catch {
        throw new CliError(`${flag} ${pair}: the value after := must be JSON (e.g. ${json[1]}:=5 or ${json[1]}:='["a","b"]')`);
      }
      continue;
    }
    const text = /^([^=]+)=(.*)$/s.exec(pair);
    if (!text) throw new CliError(`${flag} ${pair}: expected key=value (or key:=json)`);
    out[text[1]!.trim()] = text[2]!;
  }
  return out;
}

/** A JSON flag value, with a readable error naming the flag. */
export function jsonFlag(flag: string): (value: string) => unknown {
  return (value: string) => {
    try {
      return JSON.parse(value) as unknown;
    } catch (err) {
      throw new CliError(`${flag} must be JSON: ${(err as Error).message}`);
    }
  };
}
