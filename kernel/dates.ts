/**
 * The one reader of date-times that come from clients. RFC 3339 only (`2026-01-31T12:00:00Z`,
 * `2026-01-31T12:00:00.5+02:00`): a four-digit year 0001–9999, a real calendar date, hours 00–23,
 * minutes and seconds 00–59, an optional fraction of up to 9 digits (kept to the millisecond), and `Z` or
 * a `±hh:mm` offset. Every such value is an instant both JavaScript `Date` and PostgreSQL `timestamptz`
 * hold exactly.
 *
 * A leap second (`23:59:60`) is refused, not normalized: neither JavaScript nor PostgreSQL can represent
 * it, and silently moving a window edge by a second is worse than asking the client to say `:59`.
 * `Date.parse` is never used on input: it accepts `"1"`, `"2026"` and locale formats.
 */
import { RequestValidationError } from './errors.js';

const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const FIRST_INSTANT = Date.parse('0001-01-01T00:00:00.000Z');
const LAST_INSTANT = Date.parse('9999-12-31T23:59:59.999Z');

/** Why a value is not an RFC 3339 date-time Tessera accepts, or undefined when it is one. */
export function timestampProblem(value: unknown): string | undefined {
  return typeof value === 'string' ? read(value).problem : 'must be a string';
}

/** True for an RFC 3339 date-time (the OpenAPI `date-time` format, as every request is validated). */
export function isTimestamp(value: string): boolean {
  return read(value).problem === undefined;
}

/** The instant of an RFC 3339 date-time; a 422 at `loc` when it is not one. */
export function parseTimestamp(value: string, loc: Array<string | number>): Date {
  const { date, problem } = read(value);
  if (problem !== undefined || !date) {
    throw new RequestValidationError([{ loc, msg: problem ?? 'is not a date-time', type: 'date_time' }]);
  }
  return date;
}

/** True for a calendar date `YYYY-MM-DD` with a year 0001–9999 (the OpenAPI `date` format). */
export function isCalendarDate(value: string): boolean {
  const m = DATE.exec(value);
  return m !== null && calendarProblem(Number(m[1]), Number(m[2]), Number(m[3])) === undefined;
}

/** True for a calendar date or an RFC 3339 date-time. */
export function isDateOrTimestamp(value: string): boolean {
  return isCalendarDate(value) || isTimestamp(value);
}

function calendarProblem(year: number, month: number, day: number): string | undefined {
  if (year < 1) return 'year must be between 0001 and 9999';
  if (month < 1 || month > 12) return 'month must be between 01 and 12';
  if (day < 1 || day > daysIn(year, month)) return `day ${String(day).padStart(2, '0')} does not exist in that month`;
  return undefined;
}

function daysIn(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

function read(value: string): { date?: Date; problem?: string } {
  const m = DATE_TIME.exec(value);
  if (!m) return { problem: 'must be an RFC 3339 date-time like 2026-01-31T12:00:00Z (with Z or an offset like +02:00)' };
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const fraction = m[7] ?? '';
  const calendar = calendarProblem(year, month, day);
  if (calendar) return { problem: calendar };
  if (hour > 23) return { problem: 'hour must be between 00 and 23' };
  if (minute > 59) return { problem: 'minutes must be between 00 and 59' };
  if (second === 60) return { problem: 'a leap second (:60) cannot be stored: use :59' };
  if (second > 59) return { problem: 'seconds must be between 00 and 59' };
  let offsetMinutes = 0;
  if (!m[8]) {
    const offsetHours = Number(m[10]);
    const offsetMins = Number(m[11]);
    if (offsetHours > 23 || offsetMins > 59) return { problem: 'the offset must be between -23:59 and +23:59' };
    offsetMinutes = (m[9] === '-' ? -1 : 1) * (offsetHours * 60 + offsetMins);
  }
  // Date.UTC would read years 0–99 as 1900–1999: set the year separately.
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, Number(fraction.padEnd(3, '0').slice(0, 3)));
  date.setTime(date.getTime() - offsetMinutes * 60_000);
  // An offset can carry 0001-01-01 or 9999-12-31 over the edge; the instant itself must stay inside, so it
  // can be written back as a four-digit-year ISO string PostgreSQL reads.
  if (date.getTime() < FIRST_INSTANT || date.getTime() > LAST_INSTANT) {
    return { problem: 'must be an instant between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z' };
  }
  return { date };
}
