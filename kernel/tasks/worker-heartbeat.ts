/**
 * Memory of the processes that take tasks, for GET /v1/health. Every task-taking process (`tessera worker`,
 * or `tessera serve` with TESSERA_RUN_TASKS on) keeps one small row in `task_worker_heartbeats` with its
 * resident memory, refreshed every few seconds; health lists the fresh rows, and rows silent for a minute
 * are deleted by whichever process beats next. A table rather than a NATS KV entry: the database is shared
 * by every process on every backend, NATS is not always there.
 */
import { hostname } from 'node:os';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Migration } from '../db/migrations.js';
import { newId } from '../ids.js';

export const WORKER_HEARTBEAT_MS = 5_000;
/** A row not refreshed for three beats is not shown; one silent for a minute is deleted. */
const STALE_AFTER_MS = 3 * WORKER_HEARTBEAT_MS;
const DELETE_AFTER_MS = 60_000;

export const workerHeartbeatMigrations: Migration[] = [
  {
    name: '0005_task_worker_heartbeats',
    async up(db) {
      await db.schema.createTable('task_worker_heartbeats', (t) => {
        t.text('worker_id').primary();
        t.text('host').notNullable();
        t.integer('pid').notNullable();
        /** 'worker' (`tessera worker`) or 'api' (an API process that also takes tasks). */
        t.text('role').notNullable();
        t.text('transport').notNullable();
        t.bigInteger('rss_bytes').notNullable();
        t.bigInteger('heap_used_bytes').notNullable();
        t.timestamp('heartbeat_at', { useTz: true }).notNullable();
      });
    },
  },
];

export interface TaskWorkerReport {
  host: string;
  pid: number;
  role: string;
  transport: string;
  rss_bytes: number;
  heap_used_bytes: number;
  heartbeat_age_seconds: number;
  /** This row is the process answering the health request. */
  this_process: boolean;
}

/** Task-taking processes that beat within the last three beats, oldest heartbeat first. */
export async function liveTaskWorkers(db: Knex, clock: Clock): Promise<TaskWorkerReport[]> {
  const now = clock.now().getTime();
  const rows = (await db('task_worker_heartbeats')
    .where('heartbeat_at', '>=', new Date(now - STALE_AFTER_MS))
    .orderBy('heartbeat_at', 'asc')
    .select('host', 'pid', 'role', 'transport', 'rss_bytes', 'heap_used_bytes', 'heartbeat_at')) as Array<{
    host: string;
    pid: number | string;
    role: string;
    transport: string;
    rss_bytes: number | string;
    heap_used_bytes: number | string;
    heartbeat_at: Date | string;
  }>;
  const self = hostname();
  return rows.map((r) => ({
    host: r.host,
    pid: Number(r.pid),
    role: r.role,
    transport: r.transport,
    rss_bytes: Number(r.rss_bytes),
    heap_used_bytes: Number(r.heap_used_bytes),
    heartbeat_age_seconds: Math.max(0, Math.round((now - new Date(r.heartbeat_at).getTime()) / 100) / 10),
    this_process: r.host === self && Number(r.pid) === process.pid,
  }));
}

/** This process's heartbeat row, refreshed from start() until stop(). */
export class TaskWorkerHeartbeat {
  private readonly workerId = newId('twhb');
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly db: Knex,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly role: 'worker' | 'api',
    private readonly transport: string,
  ) {}

  async start(): Promise<void> {
    await this.beat();
    this.timer = setInterval(() => {
      this.beat().catch((err: unknown) => this.log.warn({ err }, 'could not refresh the task worker heartbeat'));
    }, WORKER_HEARTBEAT_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.db('task_worker_heartbeats').where({ worker_id: this.workerId }).delete();
  }

  private async beat(): Promise<void> {
    const now = this.clock.now();
    const { rss, heapUsed } = process.memoryUsage();
    await this.db('task_worker_heartbeats')
      .insert({
        worker_id: this.workerId,
        host: hostname(),
        pid: process.pid,
        role: this.role,
        transport: this.transport,
        rss_bytes: rss,
        heap_used_bytes: heapUsed,
        heartbeat_at: now,
      })
      .onConflict('worker_id')
      .merge(['rss_bytes', 'heap_used_bytes', 'heartbeat_at']);
    // Rows of processes that died without stopping.
    await this.db('task_worker_heartbeats').where('heartbeat_at', '<', new Date(now.getTime() - DELETE_AFTER_MS)).delete();
  }
}
