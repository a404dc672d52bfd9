/**
 * The embedded database (PGlite) serves one process: two processes writing one data folder would
 * each hold their own copy in memory and overwrite each other (a split brain). Whatever opens it
 * first takes TESSERA_HOME/tessera.lock; the lock names its owner (pid, process start time, host),
 * so a second process is refused with who holds it, and a lock left by a process that died is
 * taken over.
 */
import { randomBytes } from 'node:crypto';
import { linkSync, mkdirSync, readFileSync, statSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import { StartupError } from '../startup-errors.js';

export const LOCK_FILE_NAME = 'tessera.lock';

/**
 * The owner touches its lock this often. A process on another machine (a shared volume, or a new
 * container with a new host name) cannot be asked whether it runs, so its lock counts as stale once
 * it has not been touched for HEARTBEAT_STALE_MS.
 */
const HEARTBEAT_MS = 10_000;
const HEARTBEAT_STALE_MS = 60_000;

/** Locks this process holds: a second open in one process is refused too. */
const heldHere = new Set<string>();

interface LockOwner {
  pid: number;
  host: string;
  started_at: string;
  /** Start time of the process in clock ticks since boot (/proc/<pid>/stat field 22): tells a reused pid apart. */
  process_start: string | null;
  /** Tells this process's lock apart from one a later process with the same pid wrote. */
  nonce: string;
}

export interface HomeLock {
  readonly file: string;
  /** Removes the lock if it is still this process's. Idempotent and synchronous (it also runs on exit). */
  release(): void;
}

/** A held lock: the second process's one line. */
export class HomeInUseError extends StartupError {}

/** Start time of a process (Linux /proc), or null where it cannot be read. */
function processStart(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: fields after it start past the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[19] ?? null;
  } catch {
    return null;
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, under another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readOwner(file: string): LockOwner | undefined {
  try {
    const owner = JSON.parse(readFileSync(file, 'utf8')) as Partial<LockOwner>;
    return typeof owner.pid === 'number' && typeof owner.host === 'string' ? (owner as LockOwner) : undefined;
  } catch {
    return undefined;
  }
}

/** Why the recorded owner no longer holds the lock, or undefined when it still might. */
function staleReason(owner: LockOwner, file: string): string | undefined {
  if (owner.host !== os.hostname()) {
    const idleMs = Date.now() - statSync(file).mtimeMs;
    return idleMs > HEARTBEAT_STALE_MS ? `its owner on host ${owner.host} has not touched it for ${Math.round(idleMs / 1000)} s` : undefined;
  }
  if (owner.pid === process.pid) return 'it was written by an earlier process with this pid';
  if (!isRunning(owner.pid)) return `pid ${owner.pid} is not running`;
  const start = processStart(owner.pid);
  if (owner.process_start && start && start !== owner.process_start) return `pid ${owner.pid} is now another process`;
  return undefined;
}

/** `./.tessera` for a folder under the working directory, the absolute path otherwise. */
function displayHome(home: string): string {
  const relative = path.relative(process.cwd(), home);
  return relative && !relative.startsWith('..') && !path.isAbsolute(relative) ? `./${relative}` : home;
}

/**
 * Takes TESSERA_HOME/tessera.lock for this process, or throws HomeInUseError naming the process that
 * holds it. The lock is written whole to a temporary file and hard-linked into place: link() creates
 * the name only if it does not exist, so two processes starting together cannot both win, and nobody
 * ever reads a half-written lock.
 */
export function acquireHomeLock(home: string, log: Logger): HomeLock {
  mkdirSync(home, { recursive: true });
  const file = path.join(home, LOCK_FILE_NAME);
  if (heldHere.has(file)) {
    throw new HomeInUseError(`TESSERA_HOME ${displayHome(home)} is already open in this process (pid ${process.pid}).`);
  }
  const owner: LockOwner = {
    pid: process.pid,
    host: os.hostname(),
    started_at: new Date().toISOString(),
    process_start: processStart(process.pid),
    nonce: randomBytes(8).toString('hex'),
  };
  const draft = `${file}.${process.pid}.${owner.nonce}`;
  writeFileSync(draft, `${JSON.stringify(owner)}\n`, { mode: 0o644 });
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        linkSync(draft, file);
        break;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 3) throw error;
      }
      const holder = readOwner(file);
      if (!holder) {
        // Not a lock this code writes whole (see above): something else made it; do not guess.
        throw new HomeInUseError(
          `TESSERA_HOME ${displayHome(home)} has a lock file ${file} that is not Tessera's. Remove it if no Tessera runs there, or set TESSERA_HOME to another folder.`,
        );
      }
      const stale = staleReason(holder, file);
      if (!stale) {
        const where = holder.host === os.hostname() ? '' : ` on host ${holder.host}`;
        throw new HomeInUseError(
          `TESSERA_HOME ${displayHome(home)} is in use by tessera pid ${holder.pid}${where} (started ${holder.started_at}). Stop it first, or set TESSERA_HOME to another folder.`,
        );
      }
      log.warn({ lock: file, stale_pid: holder.pid, stale_since: holder.started_at }, `taking over a stale lock: ${stale}`);
      try {
        unlinkSync(file);
      } catch (unlinkError) {
        if ((unlinkError as NodeJS.ErrnoException).code !== 'ENOENT') throw unlinkError;
      }
    }
  } finally {
    unlinkSync(draft);
  }

  heldHere.add(file);
  const heartbeat = setInterval(() => {
    try {
      const now = new Date();
      utimesSync(file, now, now);
    } catch (error) {
      log.warn({ err: error, lock: file }, 'could not touch the TESSERA_HOME lock');
    }
  }, HEARTBEAT_MS);
  heartbeat.unref();

  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    clearInterval(heartbeat);
    heldHere.delete(file);
    process.off('exit', release);
    // Only our own lock: never remove one a successor took over.
    if (readOwner(file)?.nonce !== owner.nonce) return;
    try {
      unlinkSync(file);
    } catch {
      // Already gone.
    }
  };
  // process.exit() (signals, startup failures) skips asynchronous shutdown hooks but runs this.
  process.on('exit', release);
  return { file, release };
}
