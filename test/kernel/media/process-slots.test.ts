/**
 * kernel/media/process-slots: the bound on ffmpeg processes at once. Slots are granted first come, first
 * served; a release passes the slot to the next waiter; an aborted waiter leaves the queue; runFfmpeg and
 * streamFfmpeg hold a slot exactly while their process lives, whatever way the run ends.
 */
import { describe, expect, it } from 'vitest';
import { isRunning } from '../../support/processes.js';
import { MediaDecodeError } from '../../../kernel/media/errors.js';
import { runFfmpeg, streamFfmpeg } from '../../../kernel/media/ffmpeg.js';
import { ProcessSlots } from '../../../kernel/media/process-slots.js';

/**
 * A quarter second of an 8 kHz sine as mono float32, produced in real time (-re): each process lives at least
 * 0.25 s however fast the machine, so runs the slots let through together really overlap.
 */
const SHORT_SINE = ['-re', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=8000:duration=0.25', '-ac', '1', '-f', 'f32le', 'pipe:1'];

describe('ProcessSlots', () => {
  it('grants up to its limit at once, then in order of asking', async () => {
    const slots = new ProcessSlots(2);
    const first = await slots.acquire();
    const second = await slots.acquire();
    const order: string[] = [];
    const third = slots.acquire().then((release) => (order.push('third'), release));
    const fourth = slots.acquire().then((release) => (order.push('fourth'), release));
    await Promise.resolve();
    expect([slots.active, slots.queued]).toEqual([2, 2]);
    second();
    second(); // a second release of the same slot counts once
    const releaseThird = await third;
    expect([slots.active, slots.queued, order]).toEqual([2, 1, ['third']]);
    first();
    releaseThird();
    (await fourth)();
    expect([slots.active, slots.queued, slots.highWater, order]).toEqual([0, 0, 2, ['third', 'fourth']]);
  });

  it('drops a waiter whose signal aborts, with the signal reason, and gives its turn to the next', async () => {
    const slots = new ProcessSlots(1);
    const held = await slots.acquire();
    const controller = new AbortController();
    const aborted = slots.acquire(controller.signal);
    const next = slots.acquire();
    controller.abort(new Error('batch canceled'));
    await expect(aborted).rejects.toThrow('batch canceled');
    expect(slots.queued).toBe(1);
    held();
    (await next)();
    expect(slots.active).toBe(0);
    await expect(slots.acquire(controller.signal)).rejects.toThrow('batch canceled');
  });

  it('refuses a limit below one', () => {
    expect(() => new ProcessSlots(0)).toThrow(RangeError);
    expect(() => new ProcessSlots(1.5)).toThrow(RangeError);
  });
});

describe('ffmpeg under slots', () => {
  it('never runs more processes than the limit, and frees every slot when runs end, fail or stop early', async () => {
    const slots = new ProcessSlots(2);
    const spawned: number[] = [];
    // Counted from the operating system, not from the slots' own bookkeeping: ffmpeg processes alive as each starts.
    const aliveAtSpawn: number[] = [];
    const onSpawn = (pid: number): void => {
      aliveAtSpawn.push(spawned.filter(isRunning).length + 1);
      spawned.push(pid);
    };
    const results = await Promise.all(Array.from({ length: 6 }, () => runFfmpeg(SHORT_SINE, { slots, onSpawn })));
    expect(Math.max(...aliveAtSpawn)).toBe(2);
    expect(results.every((r) => r.stdout.length === 2000 * 4)).toBe(true);
    expect([spawned.length, slots.highWater, slots.active]).toEqual([6, 2, 0]);

    await expect(runFfmpeg(['-f', 'lavfi', '-i', 'nosuchsource=x', '-f', 'null', '-'], { slots })).rejects.toBeInstanceOf(MediaDecodeError);
    for await (const chunk of streamFfmpeg(SHORT_SINE, { slots })) {
      expect(slots.active).toBe(1);
      expect(chunk.length).toBeGreaterThan(0);
      break; // the consumer stops early: ffmpeg is killed and its slot comes back
    }
    expect([slots.active, slots.queued, slots.highWater]).toEqual([0, 0, 2]);
  });
});
