import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, redactUrl, resolveLogFormat } from '../../kernel/logger.js';
import { duplicateKeys } from '../support/json-keys.js';
import { startTestKernel, type TestKernel } from '../support/kernel.js';

function memoryLogger(format: 'json' | 'pretty' = 'json') {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  return { log: createLogger('debug', sink, format), lines };
}

describe('duplicateKeys', () => {
  it('finds a key repeated in one object, at any depth, and only there', () => {
    expect(duplicateKeys('{"msg":"a","x":{"k":1,"k":2},"msg":"b"}')).toEqual(['x.k', 'msg']);
    expect(duplicateKeys('{"a":[{"k":1},{"k":2}],"b":"\\"k\\":1"}')).toEqual([]);
  });
});

describe('log lines', () => {
  let t: TestKernel;
  beforeAll(async () => {
    t = await startTestKernel();
  });
  afterAll(async () => {
    await t.stop();
  });

  it('never repeat a key in one JSON line (refusals, access lines, child loggers)', async () => {
    // A refusal logs its reason beside the line's own message.
    expect((await t.request('GET', '/v1/namespaces/nowhere', { key: t.adminKey })).status).toBe(404);
    expect((await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: 'Not Valid!' } })).status).toBe(422);
    await t.request('GET', '/v1/health');
    const lines = t.logs.join('').split('\n').filter(Boolean);
    const refused = lines.find((line) => line.includes('"request refused"'));
    expect(refused).toBeDefined();
    expect(JSON.parse(refused!)).toMatchObject({ msg: 'request refused', status: 404, reason: expect.stringContaining('nowhere') });
    for (const line of lines) expect(duplicateKeys(line), line).toEqual([]);
  });

  it('do not carry the token of a presigned storage URL (access line of a blob request)', async () => {
    const token = 'eyJzZWNyZXQiOiJub3QtcmVhbCJ9.c2lnbmF0dXJlLXZhbHVl';
    await t.request('GET', `/v1/storage/blobs/${token}?X-Signature=abc123`);
    const logs = t.logs.join('');
    expect(logs).toContain('/v1/storage/blobs/[redacted]');
    expect(logs).not.toContain(token);
  });
});

describe('redaction', () => {
  it('censors authorization headers, API key headers, keys, tokens and signatures', () => {
    const { log, lines } = memoryLogger();
    log.info(
      {
        req: { headers: { authorization: 'Bearer svc_sk_secret1', 'x-public-api-key': 'pk_secret2' } },
        authorization: 'Bearer svc_sk_secret3',
        'x-public-api-key': 'pk_secret4',
        key: 'svc_sk_secret5',
        token: 'secret6',
        upload: { signature: 'secret7', token: 'secret8' },
      },
      'incoming',
    );
    log.child({ component: 'c' }).warn({ url: 'https://user:secret9@s3.example.test/b/o?X-Amz-Signature=secret10&X-Amz-Credential=c' }, 'fetched');
    const text = lines.join('\n');
    for (let i = 1; i <= 10; i++) expect(text).not.toMatch(new RegExp(`secret${i}(?!\\d)`));
    expect(text).toContain('https://user:[redacted]@s3.example.test/b/o?[redacted]');
    expect(JSON.parse(lines[0]!)).toMatchObject({ authorization: '[redacted]', key: '[redacted]', msg: 'incoming' });
  });

  it('keeps what an operator needs from a URL or path', () => {
    expect(redactUrl('/v1/namespaces/docs')).toBe('/v1/namespaces/docs');
    expect(redactUrl('/v1/storage/blobs/abc.def')).toBe('/v1/storage/blobs/[redacted]');
    expect(redactUrl('http://localhost:8080/v1/storage/blobs/abc.def?download=1')).toBe('http://localhost:8080/v1/storage/blobs/[redacted]?[redacted]');
  });
});

describe('LOG_FORMAT', () => {
  it('is pretty on a terminal and JSON lines otherwise, unless set', () => {
    expect(resolveLogFormat(undefined, { isTTY: true })).toBe('pretty');
    expect(resolveLogFormat(undefined, { isTTY: false })).toBe('json');
    expect(resolveLogFormat(undefined, {})).toBe('json');
    expect(resolveLogFormat('json', { isTTY: true })).toBe('json');
    expect(resolveLogFormat('pretty', { isTTY: false })).toBe('pretty');
  });

  it('pretty writes readable lines, not JSON, and still redacts', () => {
    const { log, lines } = memoryLogger('pretty');
    log.info({ token: 'secret-token', status: 404 }, 'request refused');
    expect(lines.length).toBeGreaterThan(0);
    expect(lines[0]).toContain('request refused');
    expect(() => JSON.parse(lines[0]!)).toThrow();
    expect(lines.join('\n')).not.toContain('secret-token');
  });
});
