import http from 'node:http';
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { Lifecycle } from '../../kernel/lifecycle.js';
import { startTestKernel } from '../support/kernel.js';

describe('Lifecycle', () => {
  it('runs shutdown hooks in reverse order, once, even when one fails', async () => {
    const lifecycle = new Lifecycle(pino({ level: 'silent' }));
    const order: string[] = [];
    lifecycle.onShutdown('database', () => void order.push('database'));
    lifecycle.onShutdown('bus', () => {
      order.push('bus');
      throw new Error('bus refused to close');
    });
    lifecycle.onShutdown('http', () => void order.push('http'));
    await Promise.all([lifecycle.stop(), lifecycle.stop()]);
    expect(order).toEqual(['http', 'bus', 'database']);
  });
});

describe('graceful shutdown', () => {
  it('finishes an in-flight request before the kernel stops, then refuses new connections', async () => {
    const t = await startTestKernel();
    const body = JSON.stringify({ namespace_name: 'drained' });
    const { port } = new URL(t.url);
    // Start a request and send only half its body, so it is in flight when stop() begins.
    const response = new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port: Number(port),
          method: 'POST',
          path: '/v1/namespaces',
          headers: { Authorization: `Bearer ${t.adminKey}`, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
        },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        },
      );
      req.on('error', reject);
      req.write(body.slice(0, 10));
      // Once the server holds the connection, begin stopping, then let the request finish.
      const waitForConnection = () =>
        t.kernel.server.getConnections((err, count) => {
          if (err) return reject(err);
          if (count === 0) return void setTimeout(waitForConnection, 10);
          stopping = t.stop();
          setImmediate(() => req.end(body.slice(10)));
        });
      waitForConnection();
    });
    let stopping: Promise<void> | undefined;
    const result = await response;
    expect(result.status).toBe(201);
    expect(JSON.parse(result.text).namespace_name).toBe('drained');
    await stopping;
    await expect(fetch(`${t.url}/v1/health`)).rejects.toThrow();
  });
});
