/**
 * Spending a retriever execution's budget from inside a stage. The engine checks limits between stages;
 * a stage that makes inference calls checks here before each one, so a `max_inference_calls` or
 * `max_credits` limit stops it before the call that would break it. The engine turns the error into a
 * `budget_exceeded` result naming the limit and the stage, with the documents found before that stage.
 */
import type { StageBudget } from '../plugins.js';

export type StageLimitName = 'max_credits' | 'max_inference_calls' | 'max_time_ms';

/** A stage could not go on without passing a budget limit. */
export class BudgetExceededError extends Error {
  constructor(
    readonly limit: StageLimitName,
    readonly value: number,
    readonly used: number,
  ) {
    super(`the budget limit ${limit} (${value}) would be exceeded (used ${used})`);
    this.name = 'BudgetExceededError';
  }
}

/**
 * Records `calls` inference calls costing `credits`, or throws BudgetExceededError (spending nothing) when
 * they would pass `max_inference_calls` or `max_credits`, or the execution's deadline has passed.
 */
export function spendInference(budget: StageBudget, calls: number, credits = 0, now = Date.now()): void {
  if (budget.maxInferenceCalls !== null && budget.inferenceCalls + calls > budget.maxInferenceCalls) {
    throw new BudgetExceededError('max_inference_calls', budget.maxInferenceCalls, budget.inferenceCalls);
  }
  if (budget.maxCredits !== null && budget.creditsUsed + credits > budget.maxCredits) {
    throw new BudgetExceededError('max_credits', budget.maxCredits, budget.creditsUsed);
  }
  if (budget.deadline !== null && now >= budget.deadline) {
    throw new BudgetExceededError('max_time_ms', budget.maxTimeMs ?? 0, Math.max(0, (budget.maxTimeMs ?? 0) + now - budget.deadline));
  }
  budget.inferenceCalls += calls;
  budget.creditsUsed += credits;
}
