/** kernel/config: settings read from the environment, with their defaults and the errors that say what to fix. */
import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../kernel/config.js';

describe('loadConfig', () => {
  it('bounds ffmpeg processes at two per core unless TESSERA_MEDIA_PROCESSES says otherwise (at least one)', () => {
    expect(loadConfig({}).mediaProcesses).toBe(2 * availableParallelism());
    expect(loadConfig({ TESSERA_MEDIA_PROCESSES: '3' }).mediaProcesses).toBe(3);
    expect(loadConfig({ TESSERA_MEDIA_PROCESSES: '0' }).mediaProcesses).toBe(1);
    expect(() => loadConfig({ TESSERA_MEDIA_PROCESSES: 'many' })).toThrow(
      'TESSERA_MEDIA_PROCESSES must be a whole number of 0 or more, got "many"; fix or unset TESSERA_MEDIA_PROCESSES.',
    );
  });
});
