/**
 * group_by: groups documents by the value of `field` (missing and null form one group, key null). Groups
 * come in the order of their best (first, highest-ranked) document and members keep their incoming order.
 *
 * - `first`: each group's first document, with `payload.group_key` set.
 * - `flatten`: up to `max_per_group` documents of each group, group after group, each with
 *   `payload.group_key` set.
 * - `all`: one document per group: its first document (id, collection and score, payload kept) whose payload
 *   also carries `group_key`, `group_size` (how many documents the group had) and `documents` (up to
 *   `max_per_group` members as stage documents, the first included).
 *
 * Only what the stage received is grouped, so a group never holds a document the caller may not read.
 */
import { defineStage, type StageDocument } from '../../../kernel/plugins.js';
import { readPath, valueKey } from '../../../kernel/retrieval/documents.js';
import { fieldPathSchema } from '../../../kernel/retrieval/schemas.js';

export interface GroupByParameters {
  field: string;
  max_per_group?: number;
  output_mode?: 'first' | 'all' | 'flatten';
}

interface Group {
  key: unknown;
  members: StageDocument[];
}

const withPayload = (doc: StageDocument, extra: Record<string, unknown>): StageDocument => ({ ...doc, payload: { ...doc.payload, ...extra } });

export default defineStage<GroupByParameters>({
  id: 'group_by',
  version: '1.0',
  type: 'group',
  description:
    'Groups documents by `field` (missing values form one group, key null), groups ordered by their best document. `output_mode` `first`: the best document of each group; `flatten`: up to `max_per_group` documents per group, group after group; `all`: one document per group (its best document) whose payload adds `group_key`, `group_size` and `documents` (up to `max_per_group` members). Every output payload carries `group_key`.',
  parameters: {
    type: 'object',
    required: ['field'],
    additionalProperties: false,
    properties: {
      field: fieldPathSchema,
      max_per_group: { type: 'integer', minimum: 1, maximum: 1000, default: 10 },
      output_mode: { enum: ['first', 'all', 'flatten'], default: 'first' },
    },
  },
  optimizer: { groupKey: (params) => params.field },
  estimateOutput: (_params, input, at) => (at.first ? 0 : input),
  async run(_ctx, docs, params) {
    const groups = new Map<string, Group>();
    for (const doc of docs) {
      const value = readPath(doc, params.field);
      const key = valueKey(value);
      const group = groups.get(key);
      if (group) group.members.push(doc);
      else groups.set(key, { key: value ?? null, members: [doc] });
    }
    const max = params.max_per_group ?? 10;
    const out: StageDocument[] = [];
    for (const { key, members } of groups.values()) {
      const first = members[0]!;
      switch (params.output_mode ?? 'first') {
        case 'first':
          out.push(withPayload(first, { group_key: key }));
          break;
        case 'flatten':
          for (const member of members.slice(0, max)) out.push(withPayload(member, { group_key: key }));
          break;
        case 'all':
          out.push(withPayload(first, { group_key: key, group_size: members.length, documents: members.slice(0, max) }));
          break;
      }
    }
    return out;
  },
});
