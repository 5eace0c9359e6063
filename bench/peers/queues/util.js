'use strict';
// bench/peers/queues/util.js: the small helpers the pg-boss and
// graphile-worker adapters share (pgboss.js, graphile.js): a sleep, the
// client's monotonic clock, a job payload of a given size, and a time
// limit on a promise.

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

module.exports = { sleep, nowNs, payload, withTimeout };
