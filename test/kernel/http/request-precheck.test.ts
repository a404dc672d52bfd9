/**
 * The request pre-check (kernel/http/request-precheck.ts) accepts only what express-openapi-validator would
 * accept, and hands everything else to it. The whole suite checks the first half on every request it sends
 * (tests run the library after an accepting pre-check: a disagreement is a 500); these cases pin what the
 * pre-check covers, what it leaves to the library, and that it fills a body's defaults as the library does.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { loadApiDocument } from '../../../kernel/app.js';
import { RequestPrecheck, type PrecheckRequest } from '../../../kernel/http/request-precheck.js';
import { REQUEST_FORMATS } from '../../../kernel/http/validation.js';

const EXECUTE = '/v1/retrievers/{retriever_id}/execute';

describe('request pre-check', () => {
  let precheck: RequestPrecheck;
  const request = (over: Partial<PrecheckRequest> = {}): PrecheckRequest => ({
    hasQuery: false,
    hasBody: true,
    contentType: 'application/json',
    headers: { 'x-namespace': 'ns', host: 'localhost' },
    body: { inputs: { vector: [0.1, 0.2] } },
    pathParams: { retriever_id: 'ret_1' },
    ...over,
  });

  beforeAll(async () => {
    precheck = new RequestPrecheck(await loadApiDocument(), { formats: REQUEST_FORMATS });
  });

  it('accepts a valid saved execute and fills the body defaults the library would', () => {
    const body: Record<string, unknown> = { inputs: { vector: [0.1, 0.2] } };
    expect(precheck.accepts(EXECUTE, 'post', request({ body, contentType: 'application/json; charset=utf-8' }))).toBe(true);
    expect(body).toMatchObject({ return_presigned_urls: false, return_vectors: false, optimize: true });
  });

  it('accepts a request without a body where none is required', () => {
    expect(precheck.accepts(EXECUTE, 'post', request({ hasBody: false, contentType: undefined, body: undefined }))).toBe(true);
  });

  it('leaves to the library a body that breaks the schema', () => {
    expect(precheck.accepts(EXECUTE, 'post', request({ body: { inputs: {}, unknown_field: 1 } }))).toBe(false);
    expect(precheck.accepts(EXECUTE, 'post', request({ body: { settings: { limit: 0 } } }))).toBe(false);
    expect(precheck.accepts(EXECUTE, 'post', request({ body: [] }))).toBe(false);
  });

  it('leaves to the library any query string, media type other than JSON, or body bytes left unparsed', () => {
    expect(precheck.accepts(EXECUTE, 'post', request({ hasQuery: true }))).toBe(false);
    expect(precheck.accepts(EXECUTE, 'post', request({ contentType: 'text/plain' }))).toBe(false);
    expect(precheck.accepts(EXECUTE, 'post', request({ contentType: 'text/plain', body: undefined }))).toBe(false);
    expect(precheck.accepts(EXECUTE, 'post', request({ contentType: undefined, body: undefined }))).toBe(false);
  });

  it('checks path and header parameters against their schemas', () => {
    expect(precheck.accepts(EXECUTE, 'post', request({ pathParams: { retriever_id: 'r'.repeat(101) } }))).toBe(false);
    expect(precheck.accepts(EXECUTE, 'post', request({ headers: { host: 'localhost' } }))).toBe(false);
    expect(precheck.accepts(EXECUTE, 'post', request({ headers: { 'x-namespace': '' } }))).toBe(false);
  });

  it('leaves an unknown operation to the library', () => {
    expect(precheck.accepts('/v1/nowhere', 'post', request())).toBe(false);
  });
});
