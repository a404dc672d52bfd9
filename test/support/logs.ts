import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import { createLogger } from '../../kernel/logger.js';

export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/** The service's own logger, writing into memory so tests can read every line it logged. */
export function capturingLogger(level = 'debug'): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString('utf8'));
      done();
    },
  });
  return { logger: createLogger(level, sink), lines };
}
