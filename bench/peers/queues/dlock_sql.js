'use strict'
// bench/peers/queues/dlock_sql.js - contender "dlock-sql" of
// bench/peers/claims.js: dlock's row claims through SQL on raw node-postgres,
// the fewest round trips a careful user writes from README.md.  Owned by
// the claims runner's author.
//
// Table peers_dlock_sql_jobs (queues/dlock_table.js: id bigserial, payload
// jsonb, status, created_at; index ON (id) WHERE status = 0;
// dlock_claim_wakeup on it).  Each worker is one pg.Client of its own
// (opened before the window), in a loop:
//   1  SELECT * FROM dlock_claim(NULL::t, $holder, $n, '30 s', 'status = 0', wait => '10 s')
//        (autocommit; an idle worker waits in the server, woken by the
//        wakeup trigger at an insert's commit: no polling, no LISTEN)
//   1  UPDATE t SET status = 1 FROM dlock_complete('t', $holder, $ids::bigint[]) AS d(id)
//       WHERE t.id = d.id          (autocommit: the fence and the rows' update
//                                   in one statement, README's form)
// = 2 round trips and 2 commits per batch, as graphile-worker's get_job +
// complete_job.  Workers waiting at the end are cancelled
// (pg_cancel_backend: what they had claimed is rolled back with the
// statement).  Safety: A claims with ttl 1 s and sleeps 1.5 s without
// renewing; B claims the lapsed job; A's completion statement runs.

const { Client } = require('pg')
const { DlockTable, timedRun, workersLatency, chores, FILTER } = require('./dlock_table')

const TABLE = 'peers_dlock_sql_jobs'
const CLAIM = `SELECT * FROM dlock_claim(NULL::${TABLE}, $1, $2, '30 s', '${FILTER}', wait => '10 s')`
const COMPLETE = `UPDATE ${TABLE} t SET status = 1 FROM dlock_complete('${TABLE}', $1, $2::bigint[]) AS d(id)
 WHERE t.id = d.id`

async function clients(cfg, n) {
  const cs = []
  for (let i = 0; i < n; i++) {
    const c = new Client(cfg)
    c.on('error', () => {})
    await c.connect()
    c.pid = (await c.query('SELECT pg_backend_pid() AS p')).rows[0].p
    cs.push(c)
  }
  return cs
}

// one worker's loop on client c until stop.now; onRows(rows) at a batch's
// start, onDone(count) after its completion
async function loop(c, holder, n, stop, onRows, onDone) {
  while (!stop.now) {
    let rows
    try {
      rows = (await c.query(CLAIM, [holder, n])).rows
    } catch (err) {
      if (stop.now && err.code === '57014') return // cancelled at the end
      throw err
    }
    if (rows.length === 0) continue
    if (onRows) onRows(rows)
    const r = await c.query(COMPLETE, [holder, rows.map((x) => x.id)])
    if (onDone) onDone(r.rowCount)
  }
}

async function open(ctx) {
  const tbl = new DlockTable(ctx, TABLE)
  await tbl.connect()

  async function startWorkers(workers, batch, onRows, onDone) {
    const cs = await clients(tbl.pgcfg, workers)
    const stop = { now: false }
    const tag = Math.random().toString(36).slice(2, 8)
    const loops = Promise.all(cs.map((c, i) => loop(c, `sql-${tag}-${i}`, batch, stop, onRows, onDone)))
    loops.catch(() => {})
    return {
      async stop() {
        stop.now = true
        // a worker still waiting in dlock_claim is cancelled; the others end
        // after their batch
        const t = setInterval(() => {
          tbl.q('SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE pid = ANY($1) AND wait_event IS NOT NULL' +
            " AND query LIKE '%dlock_claim(%'", [cs.map((c) => c.pid)]).catch(() => {})
        }, 100)
        try {
          await loops
        } finally {
          clearInterval(t)
          await Promise.all(cs.map((c) => c.end().catch(() => {})))
        }
      },
    }
  }

  return {
    meta: async () => {
      const v = (await tbl.q("SELECT extversion FROM pg_extension WHERE extname = 'dlock'")).rows[0].extversion
      return `dlock ${v} through SQL on pg (node-postgres) 8: a connection per worker; dlock_claim(NULL::t, holder, n, '30 s', ` +
        `'status = 0', wait => '10 s') (idle workers wait in the server, woken by dlock_claim_wakeup's trigger; no polling, no LISTEN), ` +
        'then UPDATE t ... FROM dlock_complete(...) in one autocommit statement (2 round trips, 2 commits per batch)'
    },
    ...chores(tbl),

    run: (opts) => timedRun(startWorkers, opts),
    latency: (opts) => workersLatency(tbl, startWorkers, opts),

    async staleComplete() {
      await tbl.clear()
      await tbl.enqueue(1)
      const [a, b] = await clients(tbl.pgcfg, 2)
      try {
        const got = (await a.query(`SELECT id FROM dlock_claim(NULL::${TABLE}, 'A', 1, '1 s', '${FILTER}')`)).rows
        const id = String(got[0].id)
        await new Promise((r) => setTimeout(r, 1500)) // A stalls past its ttl, renewing nothing
        const bGot = (await b.query(`SELECT id FROM dlock_claim(NULL::${TABLE}, 'B', 1, '30 s', '${FILTER}')`)).rows.map((r) => String(r.id))
        const r = await a.query(COMPLETE, ['A', [id]])
        const st = (await tbl.q(`SELECT status FROM ${TABLE} WHERE id = $1`, [id])).rows[0].status
        const h = (await tbl.q(`SELECT holder FROM dlock_claims WHERE table_name = '${TABLE}'::regclass AND key = $1`, [id])).rows
        const ok = bGot.includes(id) && r.rowCount === 0 && st === 0 && h.length === 1 && h[0].holder === 'B'
        return {
          ok,
          detail: `A claimed job ${id} with ttl 1 s and slept 1.5 s without renewing; B's dlock_claim then got ` +
            `${JSON.stringify(bGot)}; A's UPDATE ... FROM dlock_complete(...) updated ${r.rowCount} row(s); ` +
            `status ${st}, claim held by ${h.length ? h[0].holder : 'nobody'}`,
        }
      } finally {
        await a.end().catch(() => {})
        await b.end().catch(() => {})
        await tbl.clear()
      }
    },

    close: () => tbl.close(),
  }
}

module.exports = { name: 'dlock-sql', open }
