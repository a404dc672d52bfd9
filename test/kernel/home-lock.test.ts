import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { acquireHomeLock, HomeInUseError, LOCK_FILE_NAME } from '../../kernel/db/home-lock.js';
import { capturingLogger } from '../support/logs.js';

/** The start time /proc records for a process (what the lock compares to tell a reused pid apart). */
function processStart(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]!;
}

function writeLock(home: string, owner: Record<string, unknown>): void {
  writeFileSync(path.join(home, LOCK_FILE_NAME), JSON.stringify({ host: os.hostname(), started_at: '2026-01-01T00:00:00.000Z', nonce: 'other', ...owner }));
}

/** A pid that no process has now: one of a child that has exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  await new Promise((resolve) => child.once('exit', resolve));
  return child.pid!;
}

describe('the TESSERA_HOME lock', () => {
  let home: string;
  let sleeper: ChildProcess | undefined;
  beforeEach(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'tessera-lock-'));
  });
  afterEach(async () => {
    sleeper?.kill('SIGKILL');
    sleeper = undefined;
    await rm(home, { recursive: true, force: true });
  });

  it('is written with the owner pid and removed on release', () => {
    const lock = acquireHomeLock(home, capturingLogger().logger);
    const owner = JSON.parse(readFileSync(lock.file, 'utf8'));
    expect(owner).toMatchObject({ pid: process.pid, host: os.hostname(), process_start: processStart(process.pid) });
    lock.release();
    expect(existsSync(lock.file)).toBe(false);
  });

  it('refuses a second holder in this process', () => {
    const lock = acquireHomeLock(home, capturingLogger().logger);
    try {
      expect(() => acquireHomeLock(home, capturingLogger().logger)).toThrow(HomeInUseError);
    } finally {
      lock.release();
    }
  });

  it('refuses while the recorded process runs, naming it', async () => {
    sleeper = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)']);
    await new Promise((resolve) => sleeper!.once('spawn', resolve));
    const pid = sleeper.pid!;
    writeLock(home, { pid, process_start: processStart(pid) });
    const attempt = () => acquireHomeLock(home, capturingLogger().logger);
    expect(attempt).toThrow(HomeInUseError);
    expect(attempt).toThrow(`is in use by tessera pid ${pid} (started 2026-01-01T00:00:00.000Z). Stop it first, or set TESSERA_HOME to another folder.`);
    // The holder's lock is left as it was.
    expect(JSON.parse(readFileSync(path.join(home, LOCK_FILE_NAME), 'utf8')).pid).toBe(pid);
  });

  it('takes over a lock whose process is gone, and says so', async () => {
    const pid = await deadPid();
    writeLock(home, { pid, process_start: '1' });
    const { logger, lines } = capturingLogger();
    const lock = acquireHomeLock(home, logger);
    logger.flush();
    expect(JSON.parse(readFileSync(lock.file, 'utf8')).pid).toBe(process.pid);
    await expect.poll(() => lines.join('')).toContain(`taking over a stale lock: pid ${pid} is not running`);
    lock.release();
  });

  it('takes over a lock whose pid now belongs to another process', async () => {
    sleeper = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)']);
    await new Promise((resolve) => sleeper!.once('spawn', resolve));
    // Recorded with a start time the running process with that pid does not have: the pid was reused.
    writeLock(home, { pid: sleeper.pid!, process_start: String(Number(processStart(sleeper.pid!)) - 1) });
    const { logger, lines } = capturingLogger();
    const lock = acquireHomeLock(home, logger);
    expect(JSON.parse(readFileSync(lock.file, 'utf8')).pid).toBe(process.pid);
    await expect.poll(() => lines.join('')).toContain('is now another process');
    lock.release();
  });

  it('does not remove a lock another process took over after this one', async () => {
    const lock = acquireHomeLock(home, capturingLogger().logger);
    writeLock(home, { pid: await deadPid(), process_start: '1', nonce: 'successor' });
    lock.release();
    expect(JSON.parse(readFileSync(lock.file, 'utf8')).nonce).toBe('successor');
  });
});
