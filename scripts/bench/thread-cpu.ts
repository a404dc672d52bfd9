/**
 * CPU time of each thread of this process, from Linux's /proc (elsewhere: nothing): which thread a workload
 * keeps busy, which a process-wide figure (process.cpuUsage) cannot tell, and how long each thread was ready
 * to run but waited for a core (schedstat): on a machine with fewer cores than busy threads, the wait is
 * where a request's latency goes when its thread has little to do. Threads are named by id; this process's
 * main thread is `main`, a bench's HTTP client thread `client`. Worker threads (database, tasks, vector graphs, bench clients) and V8's and libuv's
 * helper threads (garbage collection, compilation) all show as other ids, most used first.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';

export interface ThreadTime {
  /** Clock ticks (1/100 s on Linux) used. */
  ticks: number;
  /** Nanoseconds spent runnable, waiting for a core (0 when the kernel keeps no schedstat). */
  waitNs: number;
}

export type ThreadTicks = Map<string, ThreadTime>;

/** Names given to thread ids (the benches' own client threads), shown instead of the id. */
const threadNames = new Map<string, string>();

/** Shows `name` for the thread `tid` (a Linux thread id, as `/proc/thread-self` links to it). */
export function nameThread(tid: string, name: string): void {
  threadNames.set(tid, name);
}

/** What each thread has used and waited so far. */
export function threadTicks(): ThreadTicks {
  const times: ThreadTicks = new Map();
  if (!existsSync('/proc/self/task')) return times;
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      times.set(tid === String(process.pid) ? 'main' : (threadNames.get(tid) ?? tid), { ticks: Number(fields[11]) + Number(fields[12]), waitNs: waitOf(tid) });
    } catch {
      // The thread ended meanwhile.
    }
  }
  return times;
}

/** schedstat: time on the CPU, time waiting on a run queue, timeslices (all since the thread started). */
function waitOf(tid: string): number {
  try {
    return Number(readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ')[1] ?? 0);
  } catch {
    return 0;
  }
}

/** Lines "  main 2.90 ms (waited 1.10 ms for a core)" per thread that used at least `minMs` per unit since `before`, divided by `units`. */
export function threadCpuLines(before: ThreadTicks, units: number, minMs = 0.05): string[] {
  const after = threadTicks();
  return [...after]
    .map(([tid, t]) => {
      const was = before.get(tid) ?? { ticks: 0, waitNs: 0 };
      return [tid, ((t.ticks - was.ticks) * 10) / units, (t.waitNs - was.waitNs) / 1e6 / units] as const;
    })
    .filter(([, ms]) => ms >= minMs)
    .sort((a, b) => b[1] - a[1])
    .map(([tid, ms, waited]) => `    ${tid.padEnd(8)} ${ms.toFixed(2)} ms${waited > 0 ? ` (waited ${waited.toFixed(2)} ms for a core)` : ''}`);
}
