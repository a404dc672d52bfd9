/**
 * CPU time of each thread of this process, from Linux's /proc (elsewhere: nothing): which thread a workload
 * keeps busy, which a process-wide figure (process.cpuUsage) cannot tell. Threads are named by id; this
 * process's main thread is `main`. Worker threads (database, tasks, vector graphs, bench clients) and V8's
 * and libuv's helper threads all show as other ids, most used first.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';

export type ThreadTicks = Map<string, number>;

/** Clock ticks (1/100 s on Linux) each thread has used so far. */
export function threadTicks(): ThreadTicks {
  const ticks: ThreadTicks = new Map();
  if (!existsSync('/proc/self/task')) return ticks;
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks.set(tid === String(process.pid) ? 'main' : tid, Number(fields[11]) + Number(fields[12]));
    } catch {
      // The thread ended meanwhile.
    }
  }
  return ticks;
}

/** Lines "  main 2.90 ms" per thread that used at least `minMs` per unit since `before`, divided by `units`. */
export function threadCpuLines(before: ThreadTicks, units: number, minMs = 0.05): string[] {
  const after = threadTicks();
  return [...after]
    .map(([tid, t]) => [tid, ((t - (before.get(tid) ?? 0)) * 10) / units] as const)
    .filter(([, ms]) => ms >= minMs)
    .sort((a, b) => b[1] - a[1])
    .map(([tid, ms]) => `    ${tid.padEnd(8)} ${ms.toFixed(2)} ms`);
}
