/**
 * A V8 profile of the calling thread (main or worker) from now until `stop`: its CPU profile and, when asked,
 * its sampled allocations, garbage included (what its garbage collections come from). Open either in
 * Chrome DevTools. For diagnostics (TESSERA_TASK_THREAD_PROFILE, the benchmarks), never on by default.
 */
import { Session } from 'node:inspector/promises';

export interface ThreadProfile {
  cpu: object;
  allocations?: object;
}

export async function startThreadProfile(options: { allocations?: boolean } = {}): Promise<{ stop(): Promise<ThreadProfile> }> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  if (options.allocations) {
    await session.post('HeapProfiler.enable');
    await session.post('HeapProfiler.startSampling', { samplingInterval: 16_384, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  }
  return {
    async stop() {
      const { profile: cpu } = await session.post('Profiler.stop');
      const allocations = options.allocations ? (await session.post('HeapProfiler.stopSampling')).profile : undefined;
      session.disconnect();
      return { cpu, ...(allocations ? { allocations } : {}) };
    },
  };
}
