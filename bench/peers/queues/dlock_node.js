'use strict'
// bench/peers/queues/dlock_node.js - contender "dlock-node" of
// bench/peers/claims.js: dlock's row claims through the Node client's claim
// loop (pg-dlock's `work`), as clients/node/README.md shows it.  Owned by the
// claims runner's author.
//
// Table peers_dlock_node_jobs (queues/dlock_table.js: id bigserial, payload
// jsonb, status, created_at; index ON (id) WHERE status = 0;
// dlock_claim_wakeup on it).  Settings: each worker is one
// work(pool, table, holder, { n: batch, ttl: 30, filter: 'status = 0', wait: 10,
// signal }) loop on a pg.Pool of `workers` connections (opened before the
// window): an idle loop waits in the server (dlock_claim(..., wait => '10 s'),
// woken by the wakeup trigger at an insert's commit), no polling, no LISTEN.
// Default order (the primary key: oldest first); claims renewed every ttl/3
// on the loop's own connection (never within a 3 s run).
//
// Round trips per batch (n rows), as the README's loop does them:
//   1  SELECT * FROM dlock_claim(NULL::t, holder, n, ttl, filter, NULL, NULL, wait => ...)   (autocommit)
//   4  the handler: BEGIN; batch.complete(keys, client) (SELECT k FROM
//      dlock_complete(...)); UPDATE t SET status = 1 WHERE id = ANY(done); COMMIT
// = 5 per batch, 2 commits; once per loop: the DESCRIBE of the table.
// Latency: the same loops, idle, with a handler noting its start.  Safety:
// a loop with ttl 1 s whose process stalls 2.5 s (the event loop blocked,
// as by a long synchronous section: no renewal); meanwhile another holder
// (a worker thread) claims the lapsed job; then the stalled handler completes
// as the README shows.

const { Worker } = require('worker_threads')
const { work, claims } = require('pg-dlock')
const { DlockTable, latencyTrials, warmPool, hr, FILTER, chores } = require('./dlock_table')

const TABLE = 'peers_dlock_node_jobs'
const TTL = 30
const WAIT = 10

// the README's completion: fenced by dlock_complete, in the rows' transaction
async function completeBatch(pool, batch) {
  const client = await pool.connect()
  try {
    await client.query('BEGIN')
    const done = await batch.complete(batch.keys, client)
    await client.query(`UPDATE ${TABLE} SET status = 1 WHERE id = ANY($1)`, [done])
    await client.query('COMMIT')
    return done
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {})
    throw err
  } finally {
    client.release()
  }
}

// `workers` loops until the signal; onBatch(batch) before the completion,
// onDone(done) after it
function startLoops(pool, workers, batch, signal, onBatch, onDone) {
  const tag = Math.random().toString(36).slice(2, 8)
  const loops = []
  for (let i = 0; i < workers; i++) {
    loops.push(work(pool, TABLE, `node-${tag}-${i}`, { n: batch, ttl: TTL, filter: FILTER, wait: WAIT, signal,
      onError: (err) => process.stderr.write(`dlock-node: handler: ${err.message}\n`) },
    async (b) => {
      if (onBatch) onBatch(b)
      const done = await completeBatch(pool, b)
      if (onDone) onDone(done)
    }))
  }
  return Promise.all(loops)
}

async function open(ctx) {
  const tbl = new DlockTable(ctx, TABLE)
  await tbl.connect()
  const version = require('pg-dlock/package.json').version
  return {
    meta: async () => {
      const v = (await tbl.q("SELECT extversion FROM pg_extension WHERE extname = 'dlock'")).rows[0].extversion
      return `pg-dlock ${version} (Node client) on dlock ${v}: work() loops, n = batch, ttl ${TTL} s, ` +
        `wait ${WAIT} s (idle loops wait in dlock_claim, woken by dlock_claim_wakeup's trigger; no polling, no LISTEN); ` +
        'completion BEGIN; batch.complete(keys, client); UPDATE status = 1; COMMIT (5 round trips, 2 commits per batch)'
    },
    ...chores(tbl),

    async run({ workers, batch, seconds }) {
      const pool = await warmPool(tbl.pgcfg, workers)
      const ctl = new AbortController()
      let done = 0
      let end = null
      const loops = startLoops(pool, workers, batch, ctl.signal, null, (keys) => {
        if (hr() <= end) done += keys.length
      })
      end = hr() + BigInt(Math.round(seconds * 1e9))
      const timer = setTimeout(() => ctl.abort(), seconds * 1000)
      try {
        await loops
      } finally {
        clearTimeout(timer)
        ctl.abort()
        await pool.end()
      }
      return { done }
    },

    async latency({ workers, trials }) {
      let pool = null
      let ctl = null
      let loops = null
      return latencyTrials(tbl, trials, async (onStart) => {
        pool = await warmPool(tbl.pgcfg, workers)
        ctl = new AbortController()
        loops = startLoops(pool, workers, 1, ctl.signal, (b) => {
          for (const r of b.rows) onStart(r.id)
        }, null)
      }, async () => {
        ctl.abort()
        await loops
        await pool.end()
      })
    },

    async staleComplete() {
      await tbl.clear()
      await tbl.enqueue(1)
      const pool = await warmPool(tbl.pgcfg, 2)
      const pg = require.resolve('pg')
      let detail
      let ok = false
      try {
        for await (const b of claims(pool, TABLE, 'A', { n: 1, ttl: 1, filter: FILTER })) {
          const id = String(b.keys[0])
          // B, on a thread of its own: 1.5 s later (A's ttl of 1 s is over)
          // it claims what is to be had, as any worker does
          const worker = new Worker(`
            const { workerData, parentPort } = require('worker_threads')
            const { Client } = require(workerData.pg)
            ;(async () => {
              await new Promise((r) => setTimeout(r, 1500))
              const c = new Client(workerData.cfg)
              await c.connect()
              const r = await c.query("SELECT id FROM dlock_claim(NULL::${TABLE}, 'B', 1, '30 s', '${FILTER}')")
              await c.end()
              parentPort.postMessage(r.rows.map((x) => String(x.id)))
            })().catch((e) => parentPort.postMessage({ error: e.message }))`,
          { eval: true, workerData: { pg, cfg: tbl.pgcfg } })
          const bGot = new Promise((resolve) => worker.once('message', resolve))
          // A stalls 2.5 s: its event loop blocked, nothing renewed
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2500)
          const got = await bGot
          await worker.terminate()
          const lost = b.signal.aborted || b.lost
          const done = await completeBatch(pool, b)
          const st = (await tbl.q(`SELECT status FROM ${TABLE} WHERE id = $1`, [id])).rows[0].status
          const holder = (await tbl.q(`SELECT holder FROM dlock_claims WHERE table_name = '${TABLE}'::regclass AND key = $1`, [id])).rows
          const bHas = Array.isArray(got) && got.includes(id)
          ok = bHas && done.length === 0 && st === 0 && holder.length === 1 && holder[0].holder === 'B'
          detail = `A claimed job ${id} with ttl 1 s and stalled 2.5 s (event loop blocked, no renewal); ` +
            `B claimed it after the expiry (${bHas ? 'got it' : `got ${JSON.stringify(got)}`}); ` +
            `A's batch.complete in BEGIN..UPDATE..COMMIT returned ${JSON.stringify(done)} ` +
            `(batch signal aborted: ${lost}), the row's status is ${st} and its claim is ${holder.length ? holder[0].holder : 'nobody'}'s`
          break
        }
      } finally {
        await pool.end()
        await tbl.clear()
      }
      return { ok, detail }
    },

    close: () => tbl.close(),
  }
}

module.exports = { name: 'dlock-node', open }
