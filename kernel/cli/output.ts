/**
 * How results are printed: tables and `field  value` lists for people (the default), the API's JSON with
 * --json for scripts. Results go to stdout; progress, notes and errors to stderr.
 */

export interface Column<T> {
  header: string;
  value: (row: T) => unknown;
  /** Right-aligned (numbers). */
  right?: boolean;
}

const MAX_CELL = 60;

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** One value as table text: nothing for null, compact JSON for objects, cut to MAX_CELL characters. */
export function cell(value: unknown, max = MAX_CELL): string {
  let text: string;
  if (value === null || value === undefined) text = '';
  else if (typeof value === 'string') text = value;
  else if (typeof value === 'number' || typeof value === 'boolean') text = String(value);
  else text = JSON.stringify(value);
  text = text.replace(/\s+/g, ' ');
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** Rows as an aligned table; "(none)" for no rows. */
export function printTable<T>(rows: readonly T[], columns: ReadonlyArray<Column<T>>, footer?: string): void {
  if (rows.length === 0) {
    process.stdout.write('(none)\n');
  } else {
    const cells = rows.map((row) => columns.map((c) => cell(c.value(row))));
    const widths = columns.map((c, i) => Math.max(c.header.length, ...cells.map((r) => r[i]!.length)));
    const line = (values: string[]) =>
      values
        .map((v, i) => (columns[i]!.right ? v.padStart(widths[i]!) : v.padEnd(widths[i]!)))
        .join('  ')
        .trimEnd();
    const out = [line(columns.map((c) => c.header.toUpperCase())), ...cells.map(line)];
    process.stdout.write(`${out.join('\n')}\n`);
  }
  if (footer) process.stdout.write(`${footer}\n`);
}

/** One object as `field  value` lines, in the order given (fields absent from it are left out). */
export function printFields(value: Record<string, unknown>, fields: ReadonlyArray<string | [string, unknown]>): void {
  const entries: Array<[string, string]> = [];
  for (const field of fields) {
    if (Array.isArray(field)) entries.push([field[0], cell(field[1], 200)]);
    else if (field in value) entries.push([field, cell(value[field], 200)]);
  }
  const width = Math.max(...entries.map(([k]) => k.length));
  process.stdout.write(`${entries.map(([k, v]) => `${k.padEnd(width)}  ${v}`.trimEnd()).join('\n')}\n`);
}

/** `data` as JSON with --json, otherwise as `human` prints it. */
export function emit<T>(options: { json?: boolean }, data: T, human: (data: T) => void): void {
  if (options.json) printJson(data);
  else human(data);
}

/** A note for the person (never part of the result): stderr. */
export function note(text: string): void {
  process.stderr.write(`${text}\n`);
}

export function formatBytes(bytes: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${unit === 0 ? Math.round(value) : value.toFixed(1)} ${units[unit]}`;
}

export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '?';
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** An ISO time as `YYYY-MM-DD HH:MM:SS` (UTC), for tables. */
export function shortTime(iso: unknown): string {
  return typeof iso === 'string' ? iso.replace('T', ' ').replace(/\.\d+Z$|Z$/, '') : '';
}
