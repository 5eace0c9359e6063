'use strict';
// bench/peers/queues/util.js: the small helpers the pg-boss and
// graphile-worker adapters share (pgboss.js, graphile.js): a sleep, the
// client's monotonic clock, a job payload of a given size, and a time
// limit on a promise; the loop of their latency trials.

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const nowNs = () => process.hrtime.bigint();

// a JSON object of exactly `bytes` bytes when serialised (extra fields included)
function payload(bytes, extra) {
  const base = JSON.stringify({ ...(extra || {}), p: '' });
  const pad = Math.max(0, bytes - base.length);
  return { ...(extra || {}), p: 'x'.repeat(pad) };
}

function withTimeout(promise, ms, what) {
  let t;
  return Promise.race([
    promise.finally(() => clearTimeout(t)),
    new Promise((_, rej) => { t = setTimeout(() => rej(new Error(`${what}: no answer in ${ms} ms`)), ms); }),
  ]);
}

// The insert-to-start trials of a peer's latency(): timer.started(trial)
// is called by the job's handler as it starts (the payload carries
// `trial`); timer.run(trials, insert, label) waits for the workers to be
// idle, then per trial waits 20-50 ms, awaits insert(i) (the job's insert,
// committed) and the handler's start, and returns the milliseconds between.
function trialTimer() {
  let want = -1;
  let resolveSeen = null;
  return {
    started(trial) {
      const t = nowNs();
      if (trial === want && resolveSeen) { const r = resolveSeen; resolveSeen = null; r(t); }
    },
    async run(trials, insert, label) {
      const out = [];
      await sleep(300); // every worker has made its first (empty) fetch and is waiting
      for (let i = 0; i < trials; i++) {
        await sleep(20 + Math.random() * 30);
        want = i;
        const seen = new Promise((r) => { resolveSeen = r; });
        await insert(i);
        const t0 = nowNs();
        const t1 = await withTimeout(seen, 60000, `${label} latency trial ${i}`);
        out.push(Number(t1 - t0) / 1e6);
      }
      return out;
    },
  };
}

module.exports = { sleep, nowNs, payload, withTimeout, trialTimer };
