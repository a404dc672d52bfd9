/**
 * fetch over node:http for the client's JSON calls. The global fetch (undici) costs a CLI call about 70 ms
 * of CPU just to initialize, a third of `tessera me`; node:http is already loaded. Bodies are small JSON
 * here (file uploads stream through the global fetch instead).
 */
import http from 'node:http';
import https from 'node:https';

export async function nodeFetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const request = input instanceof Request ? input : new Request(input, init);
  const url = new URL(request.url);
  const body = request.body ? Buffer.from(await request.arrayBuffer()) : undefined;
  const headers: Record<string, string> = {};
  request.headers.forEach((value, name) => {
    headers[name] = value;
  });
  if (body) headers['content-length'] = String(body.length);
  return new Promise<Response>((resolve, reject) => {
    const transport = url.protocol === 'https:' ? https : http;
    const outgoing = transport.request(url, { method: request.method, headers, signal: request.signal }, (incoming) => {
      const chunks: Buffer[] = [];
      incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
      incoming.on('error', reject);
      incoming.on('end', () => {
        const responseHeaders = new Headers();
        for (const [name, value] of Object.entries(incoming.headers)) {
          if (Array.isArray(value)) for (const v of value) responseHeaders.append(name, v);
          else if (value !== undefined) responseHeaders.set(name, value);
        }
        const status = incoming.statusCode ?? 502;
        const empty = status === 204 || status === 304 || request.method === 'HEAD';
        resolve(new Response(empty ? null : new Uint8Array(Buffer.concat(chunks)), { status, statusText: incoming.statusMessage ?? '', headers: responseHeaders }));
      });
    });
    outgoing.on('error', reject);
    outgoing.end(body);
  });
}
