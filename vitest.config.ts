import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    teardownTimeout: 30_000,
    // expect.poll's 1 s default is shorter than a scrypt verify or a page round trip on a loaded 2-core CI machine.
    expect: { poll: { timeout: 15_000 } },
  },
});
