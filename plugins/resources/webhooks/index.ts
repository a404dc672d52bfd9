/**
 * Webhooks: signed HTTP callbacks (Standard Webhooks) for the organization's domain events and retriever
 * alerts. Events fan out to deliveries (fanout.ts), each attempt runs as a task (delivery.ts), and the
 * retrievers plugin asks this plugin's directory which alerts anyone listens to (kernel/retrieval/alerts.ts).
 */
import type { Container } from 'inversify';
import { callerOf } from '../../../kernel/http/handlers.js';
import { defineResource } from '../../../kernel/plugins.js';
import { SecretBox } from '../../../kernel/secret-box.js';
import {
  BlobSigningSecret,
  Clock,
  Config,
  DatabaseHandle,
  Lifecycle,
  RetrieverAlertPolicy,
  RootLogger,
  TaskQueue,
  createToken,
  type Services,
} from '../../../kernel/tokens.js';
import { DeliveryRunner } from './delivery.js';
import { WebhookDirectory } from './directory.js';
import { WEBHOOK_EVENT_TYPES } from './event-types.js';
import { EventFanout } from './fanout.js';
import { webhookMigrations } from './migrations.js';
import { toDelivery, toWebhook } from './serialize.js';
import { WebhookService } from './service.js';
import { DeliveryStore, WebhookStore } from './store.js';

const Webhooks = createToken<WebhookService>('webhooks.WebhookService');
const Deliveries = createToken<DeliveryStore>('webhooks.DeliveryStore');
const Runner = createToken<DeliveryRunner>('webhooks.DeliveryRunner');
const Fanout = createToken<EventFanout>('webhooks.EventFanout');

const SWEEP_TASK = 'webhooks.sweep';
const SWEEP_INTERVAL_MS = 3_600_000;
/** Deliveries are kept this long (the deliveries list says so). */
const DELIVERY_RETENTION_MS = 30 * 24 * 3_600_000;

function bind(container: Container, services: Services): void {
  const db = services.get(DatabaseHandle).db;
  const config = services.get(Config);
  const clock = services.get(Clock);
  const webhooks = new WebhookStore(db, new SecretBox(services.get(BlobSigningSecret), 'webhook-secrets'));
  const deliveries = new DeliveryStore(db);
  const directory = new WebhookDirectory(webhooks, clock);
  const runner = new DeliveryRunner(db, webhooks, deliveries, services.get(TaskQueue), clock, services.get(RootLogger).child({ plugin: 'webhooks', component: 'deliveries' }), {
    timeoutMs: config.webhookTimeoutMs,
    retryBaseMs: config.webhookRetryBaseMs,
    allowPrivate: config.allowPrivateWebhookUrls,
  });
  const fanout = new EventFanout(db, directory, deliveries, runner, clock);
  container.bind(RetrieverAlertPolicy).toConstantValue(directory);
  container.bind(Deliveries).toConstantValue(deliveries);
  container.bind(Runner).toConstantValue(runner);
  container.bind(Fanout).toConstantValue(fanout);
  container.bind(Webhooks).toConstantValue(new WebhookService(webhooks, directory, fanout, clock, config.allowPrivateWebhookUrls));
}

export default defineResource({
  name: 'webhooks',
  migrations: webhookMigrations,
  services: bind,
  setup: ({ services, events, log }) => {
    services.get(Runner).register();
    const fanout = services.get(Fanout);
    const lifecycle = services.get(Lifecycle);
    for (const type of WEBHOOK_EVENT_TYPES) {
      const unsubscribe = events.subscribe(type, async (event) => {
        await fanout.handle(event);
      });
      lifecycle.onShutdown(`webhooks: ${type} subscription`, unsubscribe);
    }
    const tasks = services.get(TaskQueue);
    tasks.register(SWEEP_TASK, async () => ({
      deleted: await services.get(Deliveries).deleteOlderThan(new Date(services.get(Clock).now().getTime() - DELIVERY_RETENTION_MS)),
    }));
    const timer = setInterval(() => {
      tasks.enqueue(SWEEP_TASK, {}, { dedupeKey: SWEEP_TASK, maxAttempts: 1 }).catch((err: unknown) => log.error({ err }, 'could not schedule the webhook delivery sweep'));
    }, SWEEP_INTERVAL_MS);
    timer.unref();
    lifecycle.onShutdown('webhooks: delivery sweep timer', () => clearInterval(timer));
  },
  handlers: {
    createWebhook: async ({ body, ctx, services }) => {
      const caller = callerOf(ctx);
      const row = await services.get(Webhooks).create(caller.organizationId, caller.userEmail, body);
      return { status: 201, body: toWebhook(row) };
    },
    listWebhooks: async ({ query, ctx, services }) => {
      const page = await services.get(Webhooks).list(callerOf(ctx).organizationId, query.limit ?? 100, query.cursor);
      return { status: 200, body: { results: page.rows.map(toWebhook), has_next: page.nextCursor !== null, next_cursor: page.nextCursor } };
    },
    getWebhook: async ({ params, ctx, services }) => {
      return { status: 200, body: toWebhook(await services.get(Webhooks).get(callerOf(ctx).organizationId, params.webhook_id)) };
    },
    updateWebhook: async ({ params, body, ctx, services }) => {
      return { status: 200, body: toWebhook(await services.get(Webhooks).update(callerOf(ctx).organizationId, params.webhook_id, body)) };
    },
    deleteWebhook: async ({ params, ctx, services }) => {
      await services.get(Webhooks).delete(callerOf(ctx).organizationId, params.webhook_id);
      return { status: 200, body: { webhook_id: params.webhook_id, deleted: true } };
    },
    rotateWebhookSecret: async ({ params, body, ctx, services }) => {
      const { row, secret } = await services.get(Webhooks).rotateSecret(callerOf(ctx).organizationId, params.webhook_id, body?.secret);
      return { status: 200, body: { ...toWebhook(row), secret } };
    },
    testWebhook: async ({ params, ctx, services }) => {
      const caller = callerOf(ctx);
      const delivery = await services.get(Webhooks).sendTest(caller.organizationId, params.webhook_id, caller.userEmail);
      return { status: 202, body: toDelivery(delivery) };
    },
    listWebhookDeliveries: async ({ params, query, ctx, services }) => {
      const organizationId = callerOf(ctx).organizationId;
      await services.get(Webhooks).get(organizationId, params.webhook_id);
      const page = await services.get(Deliveries).list(organizationId, params.webhook_id, query.limit ?? 100, {
        ...(query.cursor ? { cursor: query.cursor } : {}),
        ...(query.status ? { status: query.status } : {}),
      });
      return { status: 200, body: { results: page.rows.map(toDelivery), has_next: page.nextCursor !== null, next_cursor: page.nextCursor } };
    },
  },
});
