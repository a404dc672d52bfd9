/**
 * Start-up and shut-down hooks. Whatever opens a pool, a connection or a timer registers how to close
 * it; stop() runs the hooks in reverse order of registration, each once, even when one fails.
 */
import type { Logger } from 'pino';

type Hook = { name: string; run: () => Promise<void> | void };

export class Lifecycle {
  private readonly startHooks: Hook[] = [];
  private readonly stopHooks: Hook[] = [];
  private stopping: Promise<void> | undefined;

  constructor(private readonly log: Logger) {}

  onStart(name: string, run: Hook['run']): void {
    this.startHooks.push({ name, run });
  }

  onShutdown(name: string, run: Hook['run']): void {
    this.stopHooks.push({ name, run });
  }

  async start(): Promise<void> {
    for (const hook of this.startHooks) await hook.run();
  }

  stop(): Promise<void> {
    this.stopping ??= this.runStopHooks();
    return this.stopping;
  }

  private async runStopHooks(): Promise<void> {
    for (const hook of [...this.stopHooks].reverse()) {
      try {
        await hook.run();
      } catch (error) {
        this.log.error({ err: error, hook: hook.name }, 'shutdown hook failed');
      }
    }
  }
}
