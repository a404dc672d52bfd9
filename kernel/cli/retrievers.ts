/** `retrievers list` and `retrievers execute`: run a saved retriever and see its ranked results. */
import type { Command } from 'commander';
import type { components } from '../../generated/openapi.js';
import { call, clientCommand, clientOf, collect, jsonFlag, namespaceOf, pairsToObject, type ClientOptions } from './context.js';
import { summaryOf } from './documents.js';
import { cell, emit, printTable, shortTime } from './output.js';

export function registerRetrievers(program: Command): void {
  const retrievers = program.command('retrievers').description('Retrievers: saved search pipelines over collections');
  clientCommand(retrievers, 'list', 'List the namespace’s retrievers').action(async (o: ClientOptions) => {
    const page = await call(o, clientOf(o).GET('/v1/retrievers', { params: { header: { 'X-Namespace': namespaceOf(o) } } }));
    emit(o, page, (p) =>
      printTable(p.results, [
        { header: 'name', value: (r) => r.retriever_name },
        { header: 'id', value: (r) => r.retriever_id },
        { header: 'version', value: (r) => r.version, right: true },
        { header: 'inputs', value: (r) => Object.keys((r.input_schema as { properties?: object } | undefined)?.properties ?? r.input_schema ?? {}).join(',') },
        { header: 'created', value: (r) => shortTime(r.created_at) },
      ]),
    );
  });
  clientCommand(retrievers, 'execute', 'Run a retriever and print its ranked results')
    .argument('<retriever>', 'name or ret_ id')
    .option('--input <key=value>', 'an input (repeatable); key:=json for a JSON value (numbers, lists)', collect, [])
    .option('--inputs <json>', 'all inputs as one JSON object (--input entries are added to it)', jsonFlag('--inputs'))
    .option('--limit <n>', 'results per page', (v) => Number(v))
    .action(async (retriever: string, o: ClientOptions & { input: string[]; inputs?: Record<string, unknown>; limit?: number }) => {
      const inputs = { ...(o.inputs ?? {}), ...pairsToObject(o.input, '--input') };
      // The JSON answer (the event-stream one is asked for with stream: true, which this never sends).
      const result = (await call(
        o,
        clientOf(o).POST('/v1/retrievers/{retriever_id}/execute', {
          params: { header: { 'X-Namespace': namespaceOf(o) }, path: { retriever_id: retriever } },
          body: { inputs, ...(o.limit ? { settings: { limit: o.limit } } : {}) },
        }),
      )) as components['schemas']['RetrieverExecutionResult'];
      emit(o, result, (r) => {
        printTable(
          r.documents.map((d, i) => ({ rank: i + 1, ...d })),
          [
            { header: '#', value: (d) => d.rank, right: true },
            { header: 'score', value: (d) => (typeof d.score === 'number' ? d.score.toFixed(4) : ''), right: true },
            { header: 'document id', value: (d) => d.document_id },
            { header: 'collection', value: (d) => d.collection_id },
            { header: 'result', value: (d) => cell(resultSummary(d), 70) },
          ],
          `${r.status}${r.error ? `: ${r.error}` : ''}; ${r.documents.length} result(s)`,
        );
        if (r.status !== 'completed') process.exitCode = 1;
      });
    });
}

/** What a result is recognized by: its document's fields (a payload carries them under `fields`), else the payload itself. */
function resultSummary(d: { payload?: Record<string, unknown> }): string {
  const payload = d.payload ?? {};
  const fields = payload.fields;
  return summaryOf(fields && typeof fields === 'object' ? (fields as Record<string, unknown>) : undefined) || summaryOf(payload);
}
