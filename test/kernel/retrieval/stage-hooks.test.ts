import { describe, expect, it } from 'vitest';
import { defineStage, PluginRegistry } from '../../../kernel/plugins.js';
import { fillStageParameters, StageChecker } from '../../../kernel/retrieval/pipeline.js';
import { RequestValidationError } from '../../../kernel/errors.js';

const templated = defineStage<{ template: unknown; label?: string }>({
  id: 'templated',
  version: '1.0',
  type: 'apply',
  description: 'a stage with a raw template parameter and its own check',
  parameters: { type: 'object', required: ['template'], properties: { template: {}, label: { type: 'string' } } },
  rawParameters: ['template'],
  check: (params, definition) =>
    JSON.stringify(params.template).includes('oops') ? [{ path: ['template', 'a'], message: `bad template (inputs: ${definition.inputNames.join(',')})` }] : [],
  run: async (_ctx, docs) => docs,
});

describe('stage hooks: raw parameters and definition checks', () => {
  const registry = new PluginRegistry();
  registry.add(templated, 'test');
  const checker = new StageChecker(registry);
  const spec = (parameters: Record<string, unknown>) => [{ stage_name: 's', config: { stage_id: 'templated', parameters } }];

  it('fills placeholders everywhere but in raw parameters', () => {
    const filled = fillStageParameters(registry.stages.get('templated')!, { template: { a: '{{inputs.q}}', b: 'x {{inputs.q}}' }, label: '{{inputs.q}}' }, { q: '{% raw %}' });
    expect(filled).toEqual({ template: { a: '{{inputs.q}}', b: 'x {{inputs.q}}' }, label: '{% raw %}' });
  });

  it("does not take a raw parameter's {{inputs.x}} for a placeholder, and reports the stage's own problems as 422s", () => {
    expect(checker.checkDefinition(spec({ template: '{{inputs.undeclared}}' }), {}, ['body', 'stages'])).toEqual([{ stage_name: 's', stage_id: 'templated', version: '1.0' }]);
    let error: unknown;
    try {
      checker.checkDefinition(spec({ template: { a: 'oops' } }), { q: { type: 'string' } } as never, ['body', 'stages']);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(RequestValidationError);
    expect((error as RequestValidationError).problems).toEqual([
      { loc: ['body', 'stages', 0, 'config', 'parameters', 'template', 'a'], msg: 'templated: bad template (inputs: q)', type: 'stage_check' },
    ]);
  });

  it('runs the check only once the schema passes', () => {
    expect(() => checker.checkDefinition(spec({ label: 'oops' }), {}, ['body', 'stages'])).toThrow(RequestValidationError);
    expect(() => checker.checkDefinition(spec({ template: 'fine', label: 'oops' }), {}, ['body', 'stages'])).not.toThrow();
  });
});
