/** The processing DAG: tiers from a bucket down its chains of collections, and cycles refused. */
import { describe, expect, it } from 'vitest';
import { ConflictError } from '../../../../kernel/errors.js';
import { resolveTiers, type PlanNode } from '../../../../plugins/resources/collections/processing/plan.js';

const node = (id: string, source: string, enabled = true): PlanNode => ({
  collection_id: id,
  enabled,
  source_bucket_id: source.startsWith('bkt_') ? source : null,
  source_collection_id: source.startsWith('col_') ? source : null,
});

describe('resolveTiers', () => {
  it('puts bucket readers in tier 0 and each chained collection one tier below its source', () => {
    const plan = resolveTiers('bkt_a', [
      node('col_text', 'bkt_a'),
      node('col_img', 'bkt_a'),
      node('col_other', 'bkt_b'),
      node('col_summary', 'col_text'),
      node('col_tags', 'col_img'),
      node('col_deep', 'col_summary'),
    ]);
    expect(plan.tiers).toEqual([['col_img', 'col_text'], ['col_summary', 'col_tags'], ['col_deep']]);
    expect(plan.sources).toMatchObject({ col_text: null, col_summary: 'col_text', col_deep: 'col_summary' });
  });

  it('leaves out disabled collections and everything downstream of them', () => {
    const plan = resolveTiers('bkt_a', [node('col_text', 'bkt_a', false), node('col_summary', 'col_text'), node('col_img', 'bkt_a')]);
    expect(plan.tiers).toEqual([['col_img']]);
  });

  it('has no tiers for a bucket nothing reads', () => {
    expect(resolveTiers('bkt_z', [node('col_text', 'bkt_a')]).tiers).toEqual([]);
  });

  it('refuses a cycle in the source graph', () => {
    const nodes = [node('col_root', 'bkt_a'), node('col_x', 'col_y'), node('col_y', 'col_x')];
    expect(() => resolveTiers('bkt_a', nodes)).toThrow(ConflictError);
    expect(() => resolveTiers('bkt_a', nodes)).toThrow(/cycle/);
    expect(() => resolveTiers('bkt_a', [node('col_self', 'col_self')])).toThrow(/cycle/);
  });
});
