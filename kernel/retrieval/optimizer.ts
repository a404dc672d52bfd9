/**
 * The retriever optimizer: rewrites a filled pipeline (placeholders replaced, parameters checked) into a
 * cheaper one that returns the same documents, in the same order, with the same scores.
 *
 * DESIGN. The kernel never imports plugins, so the optimizer knows nothing about any stage by id. A stage
 * opts in by declaring `optimizer` traits on its StagePlugin (kernel/plugins.ts); each trait is a promise
 * about the stage's own semantics, and the stage — which knows its internals — decides when a rewrite is
 * equivalent (a hook returns undefined to refuse). The rules only combine those promises:
 *
 * - `merge_consecutive_filters`: two adjacent `filter` stages become the first one with the AND of both
 *   filters (the kernel's filter language; refused when their `case_sensitive` differ or the AND would break
 *   the language's depth/size limits).
 * - `push_down_filters`: (a) a `filter` stage right after a stage that `absorbFollowingFilter` accepts it
 *   (e.g. feature_search without searches: a pure filter, so nothing is cut before the filter);
 *   (b) a `filter` stage that reads the collections (first stage) followed by a stage that
 *   `absorbSourceFilter`s it: the filter moves into that stage's index scan (feature_search's pre_filters,
 *   whose candidate ranking is exact, so "top_k among the filter's matches" is what both forms return).
 *   A filter AFTER a top_k search is never pushed into it: that would return documents the search had cut
 *   (explain suggests it instead, as a change of meaning the user may want).
 * - `group_by_push_down`: a `filter` right after a `group` stage whose conditions read only the group key
 *   moves before the grouping (every member of a group has the same key, so filtering members or groups
 *   keeps the same groups with the same first members), where the other rules may merge or push it further.
 * - `eliminate_redundant_sorts`: a `sort` whose order is already known to hold (a search's relevance order,
 *   the same sort earlier, carried through stages that `passThrough`) is removed; a sort immediately
 *   followed by a `total` sort (whose output does not depend on input order) or by a stable sort on the same
 *   comparison `field` is removed.
 *
 * Equivalence contract: for every execution that completes without the optimizer, the optimized one
 * completes with identical documents, order and scores (test/kernel/retrieval/optimizer-equivalence.test.ts
 * checks it on random pipelines). The first stage of a pipeline reads the collections and later ones refine
 * what they receive, so no rule removes or moves the first stage away from the front, except into a stage
 * that takes its place as the reader. The one difference allowed: a first-stage filter that would have
 * failed for matching more than its `limit` may succeed once merged with a narrower filter. An execution
 * stopped by a budget limit returns what the plan that ran had found: a stage folded into a later one found
 * nothing on its own (run with `optimize: false` to stop between the stages as written).
 *
 * Statistics: the stage that runs reports under its own (the user's) name; a stage folded into another or
 * removed reports `status: optimized_away` with `optimized_into` (the stage that took its work, or null).
 */
import { parseFilter, type FilterInput, type FilterNode } from '../filters/filter.js';
import type { StagePlugin } from '../plugins.js';
import type { StageSpec } from './pipeline.js';

export type OptimizerRule = 'push_down_filters' | 'group_by_push_down' | 'merge_consecutive_filters' | 'eliminate_redundant_sorts';

/** Where a stage sits: the first stage reads the collections; later ones refine their input. */
export interface StagePosition {
  first: boolean;
}

/** What a `sort` trait says about the order a stage produces. */
export interface SortTrait {
  /** The order produced, direction included (e.g. `relevance:desc`, `sort_attribute:price:asc`). */
  key: string;
  /** The comparison without direction: two stable sorts on one field make the first one useless. */
  field: string;
  /** The output order depends only on the set of documents (distinct ids), never on their incoming order. */
  total: boolean;
}

/**
 * Optional promises a stage makes to the optimizer (all about the stage's own behaviour). Declaring any
 * trait also promises that the stage never returns one document_id twice unless its input had it twice. A
 * stage without traits is never rewritten, stops order tracking, and may duplicate documents (e.g. unwind),
 * after which no sort counts as total (equal scores and ids would keep their incoming order).
 */
export interface StageOptimizerTraits<P> {
  /**
   * The stage keeps exactly the documents matching this filter (kernel filter language), unchanged and in
   * their order; as the first stage it reads the matching documents of the collections. `write` returns the
   * parameters with another filter.
   */
  filter?: { read(params: P): FilterInput | undefined; write(params: P, filter: FilterInput): P };
  /** Parameters equivalent to "this stage, then keep what matches `filter`", or undefined when there are none. */
  absorbFollowingFilter?(params: P, filter: FilterInput, at: StagePosition): P | undefined;
  /**
   * Parameters for this stage run FIRST that equal "the collections' documents matching `filter`, then this
   * stage run over them", or undefined.
   */
  absorbSourceFilter?(params: P, filter: FilterInput): P | undefined;
  /** The stage sorts its input: what order it produces. */
  sort?(params: P): SortTrait | undefined;
  /** The order the stage's output is in whatever its input (a search in relevance order), as a SortTrait key. */
  outputOrder?(params: P, at: StagePosition): string | undefined;
  /** The stage returns a subsequence of its input, documents unchanged (a known order survives it). */
  passThrough?: boolean;
  /** The stage groups by the value at this field path alone. */
  groupKey?(params: P): string | undefined;
}

export interface PreparedStage {
  spec: StageSpec;
  stage: StagePlugin<never>;
  parameters: Record<string, unknown>;
}

/** A stage of the optimized plan: the user's stage (name, position) with possibly rewritten parameters. */
export interface PlannedStage extends PreparedStage {
  originalIndex: number;
  /** Names of the user's stages folded into this one. */
  absorbed: string[];
}

export interface RemovedStage {
  stage_name: string;
  stage_id: string;
  stage_index: number;
  version: string;
  rule: OptimizerRule;
  optimized_into: string | null;
}

export interface OptimizationSummary {
  original_stage_count: number;
  optimized_stage_count: number;
  optimization_time_ms: number;
  rules_applied: OptimizerRule[];
  stage_reduction_pct: number;
}

export interface OptimizedPlan {
  stages: PlannedStage[];
  removed: RemovedStage[];
  /** Null when nothing changed (optimization_applied false). */
  summary: OptimizationSummary | null;
}

/** Checks rewritten parameters against the stage's schema (a rewrite that fails it is not applied). */
export type ParameterCheck = (stage: StagePlugin<never>, parameters: Record<string, unknown>) => boolean;

type Traits = StageOptimizerTraits<Record<string, unknown>>;
const traitsOf = (s: PlannedStage): Traits => (s.stage.optimizer ?? {}) as Traits;

const isEmptyFilter = (f: FilterInput): boolean => !['AND', 'OR', 'NOT'].some((k) => Array.isArray(f[k as 'AND']) && f[k as 'AND']!.length > 0);

/**
 * The AND of two filters of the language, or undefined when it cannot be written as one (different
 * `case_sensitive`, or past the language's nesting/size limits). Stages use it to take a filter in.
 */
export function conjoinFilters(a: FilterInput | undefined, b: FilterInput): FilterInput | undefined {
  if (!a || isEmptyFilter(a)) return b;
  if (isEmptyFilter(b)) return a;
  if ((a.case_sensitive === true) !== (b.case_sensitive === true)) return undefined;
  const onlyAnd = (f: FilterInput) => Object.keys(f).every((k) => k === 'AND' || k === 'case_sensitive');
  const parts = (f: FilterInput): unknown[] => {
    if (onlyAnd(f)) return [...(f.AND ?? [])];
    const { case_sensitive: _ignored, ...rest } = f;
    return [rest];
  };
  const merged: FilterInput = { AND: [...parts(a), ...parts(b)], ...(a.case_sensitive === true ? { case_sensitive: true } : {}) };
  try {
    parseFilter(merged, ['optimizer']);
  } catch {
    return undefined;
  }
  return merged;
}

/** Every field path a filter's conditions read (undefined when it does not parse). */
export function filterFields(filter: FilterInput): Set<string> | undefined {
  let parsed;
  try {
    parsed = parseFilter(filter, ['optimizer']);
  } catch {
    return undefined;
  }
  const fields = new Set<string>();
  const walk = (n: FilterNode): void => {
    if (n.kind === 'condition') fields.add(n.field);
    else [...n.and, ...n.or, ...n.not].forEach(walk);
  };
  walk(parsed.root);
  return fields;
}

/** At most this many rewrites per pipeline: every rule shortens the pipeline or moves a filter forward. */
const MAX_REWRITES = 500;

export function optimizePipeline(prepared: readonly PreparedStage[], check: ParameterCheck): OptimizedPlan {
  const t0 = performance.now();
  const stages: PlannedStage[] = prepared.map((p, i) => ({ ...p, originalIndex: i, absorbed: [] }));
  const removed: RemovedStage[] = [];
  const applied = new Set<OptimizerRule>();

  const remove = (victim: PlannedStage, rule: OptimizerRule, into: PlannedStage | null) => {
    removed.push({
      stage_name: victim.spec.stage_name, stage_id: victim.stage.id, stage_index: victim.originalIndex, version: victim.stage.version,
      rule, optimized_into: into ? into.spec.stage_name : null,
    });
    if (into) into.absorbed.push(victim.spec.stage_name, ...victim.absorbed);
    applied.add(rule);
  };
  const withParameters = (s: PlannedStage, parameters: Record<string, unknown>): PlannedStage | undefined =>
    check(s.stage, parameters) ? { ...s, parameters, spec: { ...s.spec, config: { ...s.spec.config, parameters } } } : undefined;

  /** One rewrite anywhere in the pipeline, or false when none applies. */
  const rewriteOnce = (): boolean => {
    for (let i = 0; i + 1 < stages.length; i++) {
      const a = stages[i]!;
      const b = stages[i + 1]!;
      const ta = traitsOf(a);
      const tb = traitsOf(b);
      const fa = ta.filter?.read(a.parameters);
      const fb = tb.filter?.read(b.parameters);

      // merge_consecutive_filters: the first keeps its name and place (as the reader, when first).
      if (ta.filter && fa && fb) {
        const both = conjoinFilters(fa, fb);
        const merged = both ? withParameters(a, ta.filter.write(a.parameters, both) as Record<string, unknown>) : undefined;
        if (merged) {
          stages.splice(i, 2, merged);
          remove(b, 'merge_consecutive_filters', merged);
          return true;
        }
      }
      // push_down_filters (a): a filter after a stage that can take it without changing what it returns.
      if (!ta.filter && fb && ta.absorbFollowingFilter) {
        const next = ta.absorbFollowingFilter(a.parameters, fb, { first: i === 0 });
        const rewritten = next ? withParameters(a, next) : undefined;
        if (rewritten) {
          stages.splice(i, 2, rewritten);
          remove(b, 'push_down_filters', rewritten);
          return true;
        }
      }
      // push_down_filters (b): the reading filter moves into the next stage's index scan; that stage reads.
      if (i === 0 && fa && !tb.filter && tb.absorbSourceFilter) {
        const next = tb.absorbSourceFilter(b.parameters, fa);
        const rewritten = next ? withParameters(b, next) : undefined;
        if (rewritten) {
          stages.splice(0, 2, rewritten);
          remove(a, 'push_down_filters', rewritten);
          return true;
        }
      }
      // group_by_push_down: a filter on the group key alone runs before the grouping (never onto the reader's place).
      const key = ta.groupKey?.(a.parameters);
      if (i >= 1 && key !== undefined && fb) {
        const fields = filterFields(fb);
        if (fields && fields.size > 0 && [...fields].every((f) => f === key)) {
          stages.splice(i, 2, b, a);
          applied.add('group_by_push_down');
          return true;
        }
      }
      // eliminate_redundant_sorts: a sort whose order the next sort replaces entirely.
      const sa = i >= 1 ? ta.sort?.(a.parameters) : undefined;
      const sb = tb.sort?.(b.parameters);
      const idsUnique = stages.slice(0, i).every((s) => s.stage.optimizer !== undefined);
      if (sa && sb && ((sb.total && idsUnique) || (!sa.total && !sb.total && sa.field === sb.field))) {
        stages.splice(i, 1);
        remove(a, 'eliminate_redundant_sorts', null);
        return true;
      }
    }
    // eliminate_redundant_sorts: a sort into an order that already holds is the identity.
    let known: string | undefined;
    for (let i = 0; i < stages.length; i++) {
      const s = stages[i]!;
      const t = traitsOf(s);
      const sort = t.sort?.(s.parameters);
      if (i >= 1 && sort && known !== undefined && sort.key === known) {
        stages.splice(i, 1);
        remove(s, 'eliminate_redundant_sorts', null);
        return true;
      }
      if (sort) known = sort.key;
      else if (t.outputOrder) known = t.outputOrder(s.parameters, { first: i === 0 });
      else if (!(t.passThrough && i >= 1)) known = undefined;
    }
    return false;
  };

  for (let n = 0; n < MAX_REWRITES && rewriteOnce(); n++);
  removed.sort((x, y) => x.stage_index - y.stage_index);

  const changed = applied.size > 0;
  const summary: OptimizationSummary | null = changed
    ? {
        original_stage_count: prepared.length,
        optimized_stage_count: stages.length,
        optimization_time_ms: Math.round((performance.now() - t0) * 1000) / 1000,
        rules_applied: [...applied].sort(),
        stage_reduction_pct: Math.round(((prepared.length - stages.length) / prepared.length) * 10_000) / 100,
      }
    : null;
  return { stages, removed, summary };
}

/** The plan when optimization is off: the user's stages as they are. */
export function unoptimizedPlan(prepared: readonly PreparedStage[]): OptimizedPlan {
  return { stages: prepared.map((p, i) => ({ ...p, originalIndex: i, absorbed: [] })), removed: [], summary: null };
}
