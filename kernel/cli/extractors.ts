/** `extractors list` and `extractors get`: the feature extractors this deployment runs, a collection's building blocks. */
import type { Command } from 'commander';
import { CliError } from './errors.js';
import { call, clientCommand, clientOf, type ClientOptions } from './context.js';
import { emit, printFields, printTable } from './output.js';

export function registerExtractors(program: Command): void {
  const extractors = program.command('extractors').description('The feature extractors this deployment runs');
  clientCommand(extractors, 'list', 'List the extractor catalogue').action(async (o: ClientOptions) => {
    const catalogue = await call(o, clientOf(o).GET('/v1/collections/features/extractors', {}));
    emit(o, catalogue, (c) =>
      printTable(c.results, [
        { header: 'name', value: (e) => e.name },
        { header: 'version', value: (e) => e.version },
        { header: 'accepts', value: (e) => e.accepts.join(',') },
        { header: 'features', value: (e) => e.outputs.features.map((f) => `${f.name}(${f.dims})`).join(',') },
        { header: 'description', value: (e) => e.description },
      ], `${c.total} extractor(s)`),
    );
  });
  clientCommand(extractors, 'get', 'Show one extractor: inputs, parameters, outputs')
    .argument('<name>')
    .action(async (name: string, o: ClientOptions) => {
      const catalogue = await call(o, clientOf(o).GET('/v1/collections/features/extractors', {}));
      const found = catalogue.results.find((e) => e.name === name);
      if (!found) throw new CliError(`no extractor named '${name}'; \`tessera extractors list\` shows them`);
      emit(o, found, (e) =>
        printFields(e, [
          'name', 'version', 'description', ['accepts', e.accepts.join(', ')],
          ['inputs', e.inputs.map((i) => `${i.name}:${i.type}${i.required ? '' : '?'}`).join(', ')],
          ['parameters', Object.keys((e.parameters as { properties?: object }).properties ?? {}).join(', ')],
          ['fields', Object.keys((e.outputs.fields as { properties?: object }).properties ?? {}).join(', ')],
          ['features', e.outputs.features.map((f) => `${f.uri} (${f.dims}, ${f.distance})`).join(', ')],
        ]),
      );
    });
}
