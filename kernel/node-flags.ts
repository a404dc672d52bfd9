/**
 * The V8 flags a server process is started with (`npm start`, the Procfile, the Dockerfile):
 * `--single-threaded-gc`. By default V8 collects each thread's garbage with helper threads of its own (four,
 * shared by every thread of the process) running in parallel with, and concurrently to, the thread itself.
 * A server runs several busy threads (HTTP, embedded database, batch tasks, vector graphs) on few cores:
 * the helpers then compete with those threads for the cores, and coordinating them costs CPU of its own.
 * Collected by the thread that made the garbage, the same work takes less CPU, and batch work's collections
 * run at the batch thread's lower priority (kernel/tasks/task-thread-main.ts). Measured on 2 cores
 * (scripts/bench/ingest.ts and execute-trace.ts, alternating runs): CPU per 1,000 ingested texts
 * 0.52–0.73 s against 0.67–0.81 s, per retriever execute 2.30–2.44 ms against 2.75–2.85 ms, with p50 and
 * p95 no worse. V8 reads GC flags only as a process starts (set later, they crash it), and Node does not
 * accept this one in NODE_OPTIONS, so it is on each command line.
 */
export const SERVER_NODE_FLAGS: readonly string[] = ['--single-threaded-gc'];

/** The server flags this process was started with: what a process it starts (an inference worker) is given. */
export function inheritedNodeFlags(execArgv: readonly string[] = process.execArgv): string[] {
  return execArgv.filter((flag) => SERVER_NODE_FLAGS.includes(flag));
}
