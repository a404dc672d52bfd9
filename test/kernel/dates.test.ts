/** The one strict reader of client date-times: RFC 3339, real calendar dates, instants both JS and PostgreSQL hold. */
import { describe, expect, it } from 'vitest';
import { RequestValidationError } from '../../kernel/errors.js';
import { isCalendarDate, isTimestamp, parseTimestamp, timestampProblem } from '../../kernel/dates.js';

describe('parseTimestamp', () => {
  it.each([
    ['2026-01-31T12:00:00Z', '2026-01-31T12:00:00.000Z'],
    ['2026-01-31t12:00:00z', '2026-01-31T12:00:00.000Z'],
    ['2026-01-31T12:00:00.123456789+02:00', '2026-01-31T10:00:00.123Z'],
    ['2024-02-29T00:00:00-00:30', '2024-02-29T00:30:00.000Z'],
    ['0001-01-01T00:00:00Z', '0001-01-01T00:00:00.000Z'],
    ['0050-06-01T00:00:00Z', '0050-06-01T00:00:00.000Z'],
    ['9999-12-31T23:59:59Z', '9999-12-31T23:59:59.000Z'],
  ])('reads %s', (text, instant) => {
    expect(parseTimestamp(text, ['query', 'start']).toISOString()).toBe(instant);
    expect(isTimestamp(text)).toBe(true);
  });

  it.each([
    ['1', /RFC 3339/],
    ['2026', /RFC 3339/],
    ['2026-01-31', /RFC 3339/],
    ['2026-01-31T12:00:00', /RFC 3339/],
    ['2026-01-31 12:00:00Z', /RFC 3339/],
    ['2026-01-31T12:00:00+0200', /RFC 3339/],
    ['Jan 31 2026 12:00:00 GMT', /RFC 3339/],
    ['0000-01-01T00:00:00Z', /year/],
    ['2026-02-29T00:00:00Z', /day 29/],
    ['2026-13-01T00:00:00Z', /month/],
    ['2026-06-30T23:59:60Z', /leap second/],
    ['2026-06-30T24:00:00Z', /hour/],
    ['2026-06-30T23:60:00Z', /minutes/],
    ['2026-06-30T23:00:00+24:00', /offset/],
    ['0001-01-01T00:00:00+01:00', /between 0001/],
    ['9999-12-31T23:59:59-00:01', /between 0001/],
    ['+12345-01-01T00:00:00Z', /RFC 3339/],
  ])('refuses %s with a reason', (text, reason) => {
    expect(timestampProblem(text)).toMatch(reason);
    expect(() => parseTimestamp(text, ['body', 'expires_at'])).toThrow(RequestValidationError);
    try {
      parseTimestamp(text, ['body', 'expires_at']);
    } catch (err) {
      expect((err as RequestValidationError).problems[0]!.loc).toEqual(['body', 'expires_at']);
    }
  });

  it('reads calendar dates strictly', () => {
    expect(isCalendarDate('2024-02-29')).toBe(true);
    expect(isCalendarDate('2023-02-29')).toBe(false);
    expect(isCalendarDate('0000-01-01')).toBe(false);
    expect(isCalendarDate('2024-1-1')).toBe(false);
  });
});
