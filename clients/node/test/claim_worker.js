'use strict'
// A claim worker for dlock.test.js, run as a process of its own (fork):
//   node claim_worker.js HOLDER TTL DIE_IN_BATCH
// Claims batches of 5 rows of `jobs` (status = 0) and completes each row in
// a transaction of its own that also marks it done and logs it in
// done_log, until no row is left undone.  With DIE_IN_BATCH = k > 0, in its
// k-th batch it completes two rows, sends {dying: keys still held} to its
// parent and waits to be killed.
const dlock = require('..')
const { env, pool, sleep } = require('./helpers')

const [holder, ttl, dieIn] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])]
const app = pool(env('DLOCK_TEST_DSN'))

;(async () => {
  const ctl = new AbortController()
  const watch = setInterval(async () => {
    const r = await app.query('SELECT count(*)::int AS n FROM jobs WHERE status = 0').catch(() => null)
    if (r && r.rows[0].n === 0) ctl.abort()
  }, 200)
  let n = 0
  for await (const batch of dlock.claims(app, 'jobs', holder, { n: 5, ttl, filter: 'status = 0', orderBy: 'id', poll: 0.2, signal: ctl.signal })) {
    n++
    for (const [i, k] of batch.keys.entries()) {
      if (n === dieIn && i === 2) {
        process.send({ dying: batch.outstanding })
        await sleep(3600 * 1000)
      }
      await sleep(50) // the work
      const c = await app.connect()
      try {
        await c.query('BEGIN')
        const done = await batch.complete([k], c)
        await c.query('UPDATE jobs SET status = 1 WHERE id = ANY($1)', [done])
        await c.query('INSERT INTO done_log SELECT unnest($1::int[]), $2', [done, holder])
        await c.query('COMMIT')
      } finally {
        c.release()
      }
    }
  }
  clearInterval(watch)
  await app.end()
})().catch((e) => {
  console.error(e)
  process.exit(1)
})
