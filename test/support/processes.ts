/**
 * Real Tessera processes for tests of starting and stopping: spawn `npm start` or bin/tessera.js, read
 * their output as it comes, and follow every process they start through /proc.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

export const repoRoot = path.resolve(__dirname, '../..');
export const cliBin = path.join(repoRoot, 'bin/tessera.js');

export interface RunningProcess {
  child: ChildProcess;
  pid: number;
  stdout(): string;
  stderr(): string;
  /** Resolves with the text once `pattern` has appeared on stdout or stderr; rejects if the process exits first. */
  waitFor(pattern: RegExp): Promise<string>;
  /** Resolves with the exit code (or the signal's name) once the process has exited. */
  exited: Promise<number | string>;
}

/** The environment of a light server: a port of its own, one inference worker, no inherited settings. */
export function serverEnv(home: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ['DATABASE_URL', 'NATS_URL', 'TESSERA_ADMIN_KEY', 'LOG_FORMAT', 'LOG_LEVEL', 'TESSERA_DB_IN_MEMORY', 'INFERENCE_ADDRESSES']) delete env[name];
  return { ...env, TESSERA_HOME: home, PORT: '0', HOST: '127.0.0.1', TESSERA_INFERENCE_WORKERS: '1', ...extra };
}

export function start(command: string, args: string[], env: NodeJS.ProcessEnv): RunningProcess {
  const child = spawn(command, args, { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const waiters = new Set<() => void>();
  const notify = () => {
    for (const waiter of waiters) waiter();
  };
  child.stdout!.on('data', (chunk: Buffer) => {
    out += chunk.toString('utf8');
    notify();
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    err += chunk.toString('utf8');
    notify();
  });
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')));
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  return {
    child,
    pid: child.pid!,
    stdout: () => out,
    stderr: () => err,
    exited: exited.then(async (status) => {
      await closed; // all output read
      return status;
    }),
    waitFor: (pattern) =>
      new Promise<string>((resolve, reject) => {
        const check = () => {
          const match = pattern.exec(out) ?? pattern.exec(err);
          if (match) {
            waiters.delete(check);
            resolve(match[0]);
          }
        };
        waiters.add(check);
        check();
        void closed.then(() => {
          if (!waiters.has(check)) return;
          waiters.delete(check);
          reject(new Error(`process ${child.pid} exited before printing ${pattern}\nstdout:\n${out}\nstderr:\n${err}`));
        });
      }),
  };
}

/** `npm start` in the repository, as an operator runs it. */
export function npmStart(env: NodeJS.ProcessEnv): RunningProcess {
  return start('npm', ['start', '--silent'], env);
}

/** `tessera <args>` through bin/tessera.js. */
export function tessera(args: string[], env: NodeJS.ProcessEnv): RunningProcess {
  return start(process.execPath, [cliBin, ...args], env);
}

/** Parent pid and state of a process, or undefined once it is gone. Zombies count as gone. */
function procStat(pid: number): { ppid: number; state: string } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0]!, ppid: Number(fields[1]) };
  } catch {
    return undefined;
  }
}

export function isRunning(pid: number): boolean {
  const stat = procStat(pid);
  return stat !== undefined && stat.state !== 'Z' && stat.state !== 'X';
}

/** Every pid a tree has been seen holding, so cleanup finds processes that outlived (were orphaned by) their parent. */
const seen = new Set<number>();

/** The pid and every descendant's, read from /proc now. */
export function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = procStat(Number(entry));
    if (!stat) continue;
    children.set(stat.ppid, [...(children.get(stat.ppid) ?? []), Number(entry)]);
  }
  const tree: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    const pid = queue.shift()!;
    tree.push(pid);
    seen.add(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return tree;
}

/** The command line of a process (to tell what the tree holds in failure messages). */
export function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
  } catch {
    return '(gone)';
  }
}

/** Resolves once none of the pids runs any more (the test's own timeout bounds the wait). */
export async function allGone(pids: readonly number[]): Promise<void> {
  while (pids.some(isRunning)) await new Promise((resolve) => setTimeout(resolve, 50));
}

/** Kills what still runs of the processes these tests started (cleanup after a failed test); only Tessera's own. */
export function killStarted(roots: readonly number[]): void {
  for (const root of roots) processTree(root);
  for (const pid of seen) {
    const command = commandOf(pid);
    if (!isRunning(pid) || !/tessera|kernel\/cli\.ts|worker-main|npm start/.test(command)) continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
}

/** The URL a started server printed. */
export async function listeningUrl(server: RunningProcess): Promise<string> {
  const line = await server.waitFor(/Tessera listening on http:\/\/[^\s"]+/);
  return line.slice(line.indexOf('http://')).replace('localhost', '127.0.0.1');
}
