/**
 * The Milvus engine. The VectorIndex contract runs against a Milvus server given as
 * TEST_MILVUS_ADDRESS=host:19530 (optionally TEST_MILVUS_TOKEN); none runs on this project's CI, so
 * without it the contract is skipped and says so. The filter compiler and the configuration are
 * tested here without a server.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../../kernel/config.js';
import { RequestValidationError } from '../../../kernel/errors.js';
import { parseFilter, type FilterInput } from '../../../kernel/filters/filter.js';
import { filterDocuments, filterToMilvus, milvusNumber, milvusPath, milvusString } from '../../../kernel/filters/milvus.js';
import { createVectorIndex } from '../../../kernel/vectors/index.js';
import { idIn } from '../../../kernel/vectors/milvus.js';
import { FILTERS, runVectorIndexContract } from './contract.js';

const address = process.env.TEST_MILVUS_ADDRESS;

if (address) {
  runVectorIndexContract('milvus', async () => {
    const index = createVectorIndex({
      engine: 'milvus',
      milvus: {
        address,
        token: process.env.TEST_MILVUS_TOKEN,
        // Each run in its own collections, so runs can share a server.
        collectionPrefix: `tessera_test_${process.pid}_`,
      },
    });
    return { index, cleanup: () => index.close() };
  });
} else {
  describe('VectorIndex contract: milvus', () => {
    it.skip('TEST_MILVUS_ADDRESS not set (no Milvus server on this machine or CI): the Milvus contract did not run', () => {});
  });
}

const compile = (input: FilterInput) => filterToMilvus(parseFilter(input));
const one = (field: string, operator: string, value?: unknown, caseSensitive = false) =>
  compile({ AND: [{ field, operator, ...(value !== undefined ? { value } : {}) }], ...(caseSensitive ? { case_sensitive: true } : {}) });

/**
 * Splits an expression into tokens the way Milvus's lexer does for string literals (double quotes,
 * backslash escapes), so a test can check that user text stayed inside literals.
 */
function tokens(expr: string): { literals: string[]; code: string } {
  const literals: string[] = [];
  let code = '';
  for (let i = 0; i < expr.length; i++) {
    if (expr[i] !== '"') {
      code += expr[i];
      continue;
    }
    let raw = '';
    for (i += 1; i < expr.length && expr[i] !== '"'; i++) {
      if (expr[i] === '\\') {
        raw += expr[i]! + expr[i + 1]!;
        i += 1;
      } else raw += expr[i];
    }
    if (i >= expr.length) throw new Error(`unterminated literal in ${expr}`);
    literals.push(JSON.parse(`"${raw}"`) as string);
    code += '"…"';
  }
  return { literals, code };
}

/** The literal text a LIKE pattern matches, its unescaped `%` wildcards at either end removed. */
function likeLiteral(pattern: string): string {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] === '\\') {
      out += pattern[i + 1] ?? '';
      i += 1;
    } else if (pattern[i] === '%' && (i === 0 || i === pattern.length - 1)) {
      continue;
    } else out += pattern[i];
  }
  return out;
}

describe('Milvus filter expressions', () => {
  it('paths are JSON key lookups on the filter field, dotted paths one key per step', () => {
    expect(milvusPath('fields', 'metadata.color')).toBe('fields["metadata"]["color"]');
    expect(milvusPath('fields', 'organization_id')).toBe('fields["organization_id"]');
    expect(() => milvusPath('fields', 'a"]) or true or (["')).toThrow(RequestValidationError);
  });

  it('eq: strings read the folded copy unless case-sensitive; numbers and booleans are typed', () => {
    expect(one('metadata.color', 'eq', 'RED')).toBe('((exists fields["metadata"]["color"] and fields_ci["metadata"]["color"] == "red"))');
    expect(one('metadata.color', 'eq', 'Red', true)).toBe('((exists fields["metadata"]["color"] and fields["metadata"]["color"] == "Red"))');
    expect(one('code', 'eq', 5)).toBe('((exists fields["code"] and fields["code"] == 5.0))');
    expect(one('score', 'eq', 1.25)).toBe('((exists fields["score"] and fields["score"] == 1.25))');
    expect(one('flag', 'eq', true)).toBe('((exists fields["flag"] and fields["flag"] == true))');
    expect(one('maybe', 'eq', null)).toBe('((not exists fields["maybe"]))');
  });

  it('ne and nin are the negation of eq and in, so a missing field matches them', () => {
    expect(one('a', 'ne', 'x')).toBe('((not (exists fields["a"] and fields_ci["a"] == "x")))');
    expect(one('a', 'ne', null)).toBe('((not (not exists fields["a"])))');
    expect(one('a', 'nin', ['x', 2])).toBe('((not ((exists fields["a"] and fields_ci["a"] == "x") or (exists fields["a"] and fields["a"] == 2.0))))');
  });

  it('in is one typed equality per value (mixed types allowed)', () => {
    expect(one('code', 'in', [5, 'Nope', null, false])).toBe(
      '(((exists fields["code"] and fields["code"] == 5.0) or (exists fields["code"] and fields_ci["code"] == "nope")' +
        ' or (not exists fields["code"]) or (exists fields["code"] and fields["code"] == false)))',
    );
  });

  it('ordering reads exact values (case-sensitive strings, numbers) and is false for other types', () => {
    expect(one('rank', 'gt', 250)).toBe('((exists fields["rank"] and fields["rank"] > 250.0))');
    expect(one('rank', 'gte', 12.5)).toBe('((exists fields["rank"] and fields["rank"] >= 12.5))');
    expect(one('rank', 'lt', -3)).toBe('((exists fields["rank"] and fields["rank"] < -3.0))');
    expect(one('rank', 'lte', 1e21)).toBe('((exists fields["rank"] and fields["rank"] <= 1e+21))');
    expect(one('word', 'gt', 'Beta')).toBe('((exists fields["word"] and fields["word"] > "Beta"))');
    expect(one('word', 'gt', true)).toBe('((id == ""))');
  });

  it('contains matches a substring of a string or an element of an array', () => {
    expect(one('tags', 'contains', 'B')).toBe(
      '((exists fields["tags"] and (fields_ci["tags"] like "%b%" or json_contains(fields_ci["tags"], "b"))))',
    );
    expect(one('tags', 'contains', 'B', true)).toBe(
      '((exists fields["tags"] and (fields["tags"] like "%B%" or json_contains(fields["tags"], "B"))))',
    );
  });

  it('starts_with and ends_with are LIKE patterns with %, _ and \\ in the value taken literally', () => {
    expect(one('title', 'starts_with', 'Item 1')).toBe('((exists fields["title"] and fields_ci["title"] like "item 1%"))');
    expect(one('title', 'ends_with', '7')).toBe('((exists fields["title"] and fields_ci["title"] like "%7"))');
    const expr = one('title', 'starts_with', '50%_off\\')!;
    expect(tokens(expr).literals).toContain('50\\%\\_off\\\\%');
  });

  it('exists and not exists', () => {
    expect(one('metadata.rare', 'exists', true)).toBe('((exists fields["metadata"]["rare"]))');
    expect(one('metadata.rare', 'exists')).toBe('((exists fields["metadata"]["rare"]))');
    expect(one('metadata.rare', 'exists', false)).toBe('((not exists fields["metadata"]["rare"]))');
  });

  it('regex is refused with a 422, not approximated', () => {
    expect(() => one('title', 'regex', '^item')).toThrow(/not supported by the Milvus/);
  });

  it('AND, OR and NOT groups nest; an empty filter is no expression', () => {
    const expr = compile({
      AND: [{ field: 'namespace_id', operator: 'eq', value: 'ns_0' }],
      OR: [{ field: 'rank', operator: 'lt', value: 50 }, { AND: [{ field: 'word', operator: 'eq', value: 'gamma' }] }],
      NOT: [{ field: 'color', operator: 'eq', value: 'blue' }],
    });
    expect(expr).toBe(
      '((exists fields["namespace_id"] and fields_ci["namespace_id"] == "ns_0") and ' +
        '((exists fields["rank"] and fields["rank"] < 50.0) or ((exists fields["word"] and fields_ci["word"] == "gamma"))) and ' +
        '(not (exists fields["color"] and fields_ci["color"] == "blue")))',
    );
    expect(compile({})).toBeUndefined();
    expect(compile({ AND: [{ AND: [] }] })).toBeUndefined();
  });

  it('every filter of the contract compiles to balanced parentheses', () => {
    for (const [, input] of FILTERS) {
      const { code } = tokens(compile(input)!);
      let depth = 0;
      for (const ch of code) {
        depth += ch === '(' ? 1 : ch === ')' ? -1 : 0;
        expect(depth).toBeGreaterThanOrEqual(0);
      }
      expect(depth).toBe(0);
    }
  });

  it.each([
    ['a double quote', 'x") or true or ("'],
    ['a single quote', "x') or true or ('"],
    ['a backslash before the quote', 'x\\") or true or (\\"'],
    ['a trailing backslash', 'x\\'],
    ['newlines and control characters', 'x\n) or true or (\r\t\u0000\u001f\u007f'],
    ['brackets and keywords', '"] or exists fields["a'],
    ['non-ASCII text and emoji', 'café ☕ 🚀 ✓'],
  ])('a value with %s stays inside its literal', (_label, value) => {
    for (const operator of ['eq', 'ne', 'in', 'contains', 'starts_with', 'ends_with', 'gt']) {
      const expr = one('metadata.title', operator, operator === 'in' ? [value] : value, true)!;
      const { literals, code } = tokens(expr);
      // Outside literals there is only the compiler's own text: no user-supplied 'or true'.
      expect(code).not.toMatch(/true|\n|\\/);
      expect(code.replaceAll('"…"', '')).toMatch(/^[\w\s()[\]=<>!,.-]*$/);
      const userLiterals = literals.filter((l) => l !== 'metadata' && l !== 'title');
      expect(userLiterals.length).toBeGreaterThan(0);
      for (const literal of userLiterals) {
        // The literal decodes back to the value; a LIKE pattern once its escapes and end wildcards are
        // removed (contains also has a plain literal, for json_contains).
        if (operator === 'contains' && literal === value) continue;
        expect(['contains', 'starts_with', 'ends_with'].includes(operator) ? likeLiteral(literal) : literal).toBe(value);
      }
    }
  });

  it('ids in get and delete expressions are escaped literals too (the SDK joins ids unescaped)', () => {
    const ids = ['plain', 'x", "y', 'a\\"] or id != "'];
    const { literals, code } = tokens(idIn(ids));
    expect(literals).toEqual(ids);
    expect(code).toBe('id in ["…", "…", "…"]');
  });

  it('string literals escape quote and backslash and write control characters as \\u escapes', () => {
    expect(milvusString('a"b\\c')).toBe('"a\\"b\\\\c"');
    expect(milvusString('x\ny\u0000')).toBe('"x\\u000ay\\u0000"');
    expect(milvusString('🚀é')).toBe('"🚀é"');
    expect(() => milvusString('bad \ud800 surrogate')).toThrow(RequestValidationError);
    expect(() => milvusString('bad \udc00')).toThrow(RequestValidationError);
  });

  it('numbers are always float literals and must be finite', () => {
    expect(milvusNumber(5)).toBe('5.0');
    expect(milvusNumber(-0.5)).toBe('-0.5');
    expect(milvusNumber(1e-7)).toBe('1e-7');
    expect(() => milvusNumber(Number.NaN)).toThrow(RequestValidationError);
  });

  it('the filterable copies drop nulls from objects and fold strings in the case-insensitive one', () => {
    const { exact, folded } = filterDocuments({ a: 'MiXed', n: null, m: { k: null, t: ['X', null, 1] }, b: true });
    expect(exact).toEqual({ a: 'MiXed', m: { t: ['X', null, 1] }, b: true });
    expect(folded).toEqual({ a: 'mixed', m: { t: ['x', null, 1] }, b: true });
  });
});

describe('Milvus configuration', () => {
  it('the engine needs its settings, and a collection prefix Milvus accepts', () => {
    expect(() => createVectorIndex({ engine: 'milvus' })).toThrow(/VECTOR_ENGINE=milvus needs MILVUS_ADDRESS/);
    expect(() => createVectorIndex({ engine: 'milvus', milvus: { address: '127.0.0.1:19530', collectionPrefix: 'bad-prefix' } })).toThrow(
      /MILVUS_COLLECTION_PREFIX must start with a letter/,
    );
    // Building the engine connects nothing: the SDK is loaded on first use.
    expect(createVectorIndex({ engine: 'milvus', milvus: { address: '127.0.0.1:19530' } }).engine).toBe('milvus');
  });

  const base = { TESSERA_HOME: '/tmp/tessera-config-test' };

  it('VECTOR_ENGINE=milvus reads MILVUS_ADDRESS and the optional credentials', () => {
    const config = loadConfig({
      ...base, VECTOR_ENGINE: 'milvus', MILVUS_ADDRESS: '10.0.0.5:19530', MILVUS_USERNAME: 'root', MILVUS_PASSWORD: 'Milvus', MILVUS_DATABASE: 'tessera',
    });
    expect(config.vectorEngine).toBe('milvus');
    expect(config.milvus).toMatchObject({ address: '10.0.0.5:19530', username: 'root', password: 'Milvus', database: 'tessera' });
    expect(loadConfig({ ...base, VECTOR_ENGINE: 'milvus', MILVUS_ADDRESS: 'https://in01-x.zillizcloud.com', MILVUS_TOKEN: 'k' }).milvus?.token).toBe('k');
    expect(loadConfig({ ...base }).milvus).toBeUndefined();
  });

  it.each([
    [{ VECTOR_ENGINE: 'milvus' }, /needs MILVUS_ADDRESS/],
    [{ VECTOR_ENGINE: 'milvus', MILVUS_ADDRESS: 'not an address' }, /MILVUS_ADDRESS must be host:port/],
    [{ VECTOR_ENGINE: 'milvus', MILVUS_ADDRESS: 'h:19530', MILVUS_USERNAME: 'root' }, /MILVUS_USERNAME and MILVUS_PASSWORD go together/],
    [{ VECTOR_ENGINE: 'milvus', MILVUS_ADDRESS: 'h:19530', MILVUS_TOKEN: 't', MILVUS_USERNAME: 'u', MILVUS_PASSWORD: 'p' }, /not both/],
    [{ VECTOR_ENGINE: 'milvus', MILVUS_ADDRESS: 'h:19530', MILVUS_DATABASE: 'a-b' }, /MILVUS_DATABASE must/],
    [{ VECTOR_ENGINE: 'milvus', MILVUS_ADDRESS: 'h:19530', MILVUS_COLLECTION_PREFIX: '9x' }, /MILVUS_COLLECTION_PREFIX must/],
    [{ VECTOR_ENGINE: 'qdrant' }, /VECTOR_ENGINE must be pgvector, lancedb or milvus/],
  ])('%j is refused with what to set', (env, message) => {
    expect(() => loadConfig({ ...base, ...env })).toThrow(ConfigError);
    expect(() => loadConfig({ ...base, ...env })).toThrow(message);
  });
});
