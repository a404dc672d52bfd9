/**
 * Coalesces small concurrent calls into one request. Batch processing runs many records at once, each
 * asking the model for one or two embeddings; one gRPC request per record would spend more time on
 * framing and scheduling than on the model. Calls for the same key (model) made in the same turn of the
 * event loop — or until a batch is full — go out together, and each caller gets back its own slice.
 */
interface Waiting<T, R> {
  items: readonly T[];
  resolve: (results: R[]) => void;
  reject: (err: unknown) => void;
}

interface Pending<T, R> {
  waiting: Array<Waiting<T, R>>;
  count: number;
  timer: NodeJS.Immediate | undefined;
}

export class Coalescer<T, R> {
  private readonly pending = new Map<string, Pending<T, R>>();

  constructor(
    /** Sends one combined request; must return one result per item, in order. */
    private readonly send: (key: string, items: T[]) => Promise<R[]>,
    private readonly maxItems: number,
    /**
     * Errors caused by one caller's input (e.g. an undecodable image): the callers are then sent
     * separately, so one bad input fails only its own call.
     */
    private readonly blamesInput: (err: unknown) => boolean = () => false,
  ) {}

  submit(key: string, items: readonly T[]): Promise<R[]> {
    if (items.length === 0) return Promise.resolve([]);
    return new Promise<R[]>((resolve, reject) => {
      let entry = this.pending.get(key);
      if (entry && entry.count + items.length > this.maxItems) {
        this.flush(key);
        entry = undefined;
      }
      if (!entry) {
        entry = { waiting: [], count: 0, timer: undefined };
        this.pending.set(key, entry);
        entry.timer = setImmediate(() => this.flush(key));
      }
      entry.waiting.push({ items, resolve, reject });
      entry.count += items.length;
      if (entry.count >= this.maxItems) this.flush(key);
    });
  }

  private flush(key: string): void {
    const entry = this.pending.get(key);
    if (!entry) return;
    this.pending.delete(key);
    if (entry.timer) clearImmediate(entry.timer);
    const all = entry.waiting.flatMap((w) => w.items);
    this.send(key, all).then(
      (results) => {
        if (results.length !== all.length) {
          const err = new Error(`coalesced request returned ${results.length} results for ${all.length} inputs`);
          for (const w of entry.waiting) w.reject(err);
          return;
        }
        let offset = 0;
        for (const w of entry.waiting) {
          w.resolve(results.slice(offset, offset + w.items.length));
          offset += w.items.length;
        }
      },
      (err: unknown) => {
        if (entry.waiting.length > 1 && this.blamesInput(err)) {
          for (const w of entry.waiting) this.send(key, [...w.items]).then(w.resolve, w.reject);
          return;
        }
        for (const w of entry.waiting) w.reject(err);
      },
    );
  }
}
