import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

/** The root logger. Secrets never reach it: headers are not logged and key material is redacted. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'tessera' },
      redact: { paths: ['key', '*.key', 'authorization', '*.authorization', 'headers'], censor: '[redacted]' },
    },
    destination ?? pino.destination({ sync: false }),
  );
}
