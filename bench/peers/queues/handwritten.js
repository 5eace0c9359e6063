'use strict'
// bench/peers/queues/handwritten.js - contender "handwritten" of
// bench/peers/claims.js: the hand-written FOR UPDATE SKIP LOCKED claim of
// bench/claim_bench.sh (its side-table claim, "complete" pattern), on raw
// node-postgres.  Owned by the claims runner's author.
//
// Tables: peers_handwritten_jobs (as the dlock contenders': id bigserial,
// payload jsonb, status, created_at; index ON (id) WHERE status = 0) and the
// side table of claims peers_handwritten_claims (job_id bigint PRIMARY KEY,
// holder text, expires_at timestamptz, attempts int), a statement trigger on
// the jobs table that NOTIFYs peers_handwritten at an insert.  Each worker
// is one pg.Client (opened before the window), in a loop:
//   1  the claim, one autocommit statement: candidates WHERE status = 0 AND
//      NOT EXISTS (a live side claim) ORDER BY id LIMIT n FOR UPDATE OF j
//      SKIP LOCKED, INSERT INTO the side table ... ON CONFLICT (job_id) DO
//      UPDATE ... WHERE the old claim expired, RETURNING the jobs
//   1  the completion, one autocommit statement: WITH u AS (UPDATE jobs SET
//      status = 1 WHERE id = ANY(ids) AND EXISTS (own live side claim)
//      RETURNING id) DELETE FROM the side table WHERE job_id IN u AND holder = me
// = 2 round trips and 2 commits per batch.  An idle worker (the claim got
// nothing) waits for a NOTIFY on one LISTEN connection shared by the
// adapter's workers, or 1 s (a poll, for a notification missed between the
// claim and the wait).  Sessions run with enable_seqscan = off, as in
// bench/claim_bench.sh: the side table starts empty, and a plan made for an
// empty table probes it with a sequential scan per candidate row.
// Abandoned claims: side rows of holder 'dead' on the first n jobs, expiring
// in an hour, as a dead worker leaves them.  Safety: A claims with ttl 1 s,
// sleeps 1.5 s; B's claim takes the lapsed job over (ON CONFLICT ... WHERE
// expired); A's completion runs (it checks its own live claim).

const { Client } = require('pg')
const { DlockTable, timedRun, workersLatency, DEAD } = require('./dlock_table')

const TABLE = 'peers_handwritten_jobs'
const SIDE = 'peers_handwritten_claims'
const CHANNEL = 'peers_handwritten'
const CLAIM = (ttl) => `WITH cand AS (
  SELECT j.id FROM ${TABLE} j
   WHERE j.status = 0
     AND NOT EXISTS (SELECT 1 FROM ${SIDE} s WHERE s.job_id = j.id AND s.expires_at > clock_timestamp())
   ORDER BY j.id LIMIT $2 FOR UPDATE OF j SKIP LOCKED),
ins AS (
  INSERT INTO ${SIDE} (job_id, holder, expires_at, attempts)
  SELECT id, $1, clock_timestamp() + interval '${ttl}', 1 FROM cand
  ON CONFLICT (job_id) DO UPDATE
     SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at, attempts = ${SIDE}.attempts + 1
   WHERE ${SIDE}.expires_at <= clock_timestamp()
  RETURNING job_id)
SELECT j.* FROM ${TABLE} j JOIN ins ON ins.job_id = j.id`
const COMPLETE = `WITH u AS (UPDATE ${TABLE} j SET status = 1 WHERE j.id = ANY ($2::bigint[]) AND EXISTS (
   SELECT 1 FROM ${SIDE} s WHERE s.job_id = j.id AND s.holder = $1 AND s.expires_at > clock_timestamp()) RETURNING j.id)
DELETE FROM ${SIDE} WHERE job_id IN (SELECT id FROM u) AND holder = $1`

async function open(ctx) {
  const tbl = new DlockTable(ctx, TABLE)
  await tbl.connect()
  const cfg = { ...tbl.pgcfg, options: '-c enable_seqscan=off' }

  async function clients(n) {
    const cs = []
    for (let i = 0; i < n; i++) {
      const c = new Client(cfg)
      c.on('error', () => {})
      await c.connect()
      cs.push(c)
    }
    return cs
  }

  async function startWorkers(workers, batch, onRows, onDone) {
    const cs = await clients(workers)
    const stop = { now: false }
    const sleepers = new Set()
    const wake = () => {
      for (const f of sleepers) f()
      sleepers.clear()
    }
    const listener = (await clients(1))[0]
    listener.on('notification', wake)
    await listener.query(`LISTEN ${CHANNEL}`)
    const tag = Math.random().toString(36).slice(2, 8)
    const loop = async (c, holder) => {
      while (!stop.now) {
        const rows = (await c.query(CLAIM('30 s'), [holder, batch])).rows
        if (rows.length === 0) {
          await new Promise((resolve) => {
            const t = setTimeout(done, 1000)
            function done() { clearTimeout(t); sleepers.delete(done); resolve() }
            sleepers.add(done)
          })
          continue
        }
        if (onRows) onRows(rows)
        const r = await c.query(COMPLETE, [holder, rows.map((x) => x.id)])
        if (onDone) onDone(r.rowCount)
      }
    }
    const loops = Promise.all(cs.map((c, i) => loop(c, `hw-${tag}-${i}`)))
    loops.catch(() => {})
    return {
      async stop() {
        stop.now = true
        wake()
        try {
          await loops
        } finally {
          await Promise.all(cs.concat([listener]).map((c) => c.end().catch(() => {})))
        }
      },
    }
  }

  return {
    meta: async () => `hand-written side-table claim (bench/claim_bench.sh's), pg (node-postgres) 8, a connection per worker: ` +
      'claim = SKIP LOCKED candidates + INSERT ... ON CONFLICT DO UPDATE WHERE expired, one statement; completion = ' +
      'UPDATE jobs (own live claim) + DELETE side row, one statement (2 round trips, 2 commits per batch); idle workers ' +
      `wait for LISTEN ${CHANNEL} (a statement trigger NOTIFYs at inserts) or 1 s; enable_seqscan = off`,

    async setup() {
      await tbl.q(`CREATE TABLE IF NOT EXISTS ${TABLE} (id bigserial PRIMARY KEY, payload jsonb NOT NULL,
        status int NOT NULL DEFAULT 0, created_at timestamptz NOT NULL DEFAULT now())`)
      await tbl.q(`CREATE INDEX IF NOT EXISTS ${TABLE}_todo ON ${TABLE} (id) WHERE status = 0`)
      await tbl.q(`CREATE TABLE IF NOT EXISTS ${SIDE} (job_id bigint PRIMARY KEY, holder text NOT NULL,
        expires_at timestamptz NOT NULL, attempts int NOT NULL)`)
      await tbl.q(`CREATE OR REPLACE FUNCTION ${CHANNEL}_notify() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN PERFORM pg_notify('${CHANNEL}', ''); RETURN NULL; END $$`)
      await tbl.q(`CREATE OR REPLACE TRIGGER ${CHANNEL}_notify AFTER INSERT ON ${TABLE}
        FOR EACH STATEMENT EXECUTE FUNCTION ${CHANNEL}_notify()`)
      await this.clear()
    },
    enqueue: (n) => tbl.enqueue(n),
    async abandon(n) {
      await tbl.q(`INSERT INTO ${SIDE} SELECT id, $1, clock_timestamp() + interval '1 hour', 1
        FROM ${TABLE} WHERE status = 0 ORDER BY id LIMIT $2`, [DEAD, n])
      await tbl.q(`VACUUM ANALYZE ${TABLE}, ${SIDE}`)
    },
    async clear() {
      await tbl.q(`TRUNCATE ${TABLE}, ${SIDE}`)
      await tbl.q(`VACUUM ANALYZE ${TABLE}, ${SIDE}`)
    },
    async backlog() {
      const r = await tbl.q(`SELECT count(*) AS n FROM ${TABLE} j WHERE status = 0 AND NOT EXISTS
        (SELECT 1 FROM ${SIDE} s WHERE s.job_id = j.id AND s.holder = $1)`, [DEAD])
      return Number(r.rows[0].n)
    },

    run: (opts) => timedRun(startWorkers, opts),
    latency: (opts) => workersLatency(tbl, startWorkers, opts),

    async staleComplete() {
      await this.clear()
      await tbl.enqueue(1)
      const [a, b] = await clients(2)
      try {
        const id = String((await a.query(CLAIM('1 s'), ['A', 1])).rows[0].id)
        await new Promise((r) => setTimeout(r, 1500)) // A stalls past its ttl
        const bGot = (await b.query(CLAIM('30 s'), ['B', 1])).rows.map((r) => String(r.id))
        const r = await a.query(COMPLETE, ['A', [id]])
        const st = (await tbl.q(`SELECT status FROM ${TABLE} WHERE id = $1`, [id])).rows[0].status
        const h = (await tbl.q(`SELECT holder FROM ${SIDE} WHERE job_id = $1`, [id])).rows
        const ok = bGot.includes(id) && r.rowCount === 0 && st === 0 && h.length === 1 && h[0].holder === 'B'
        return {
          ok,
          detail: `A claimed job ${id} with ttl 1 s and slept 1.5 s; B's claim took it over (got ${JSON.stringify(bGot)}); ` +
            `A's completion (UPDATE ... AND EXISTS (own live claim), DELETE side row) touched ${r.rowCount} side row(s); ` +
            `status ${st}, side claim held by ${h.length ? h[0].holder : 'nobody'} (the check is the hand-writer's: ` +
            'it fences only while no takeover commits between its check and its commit)',
        }
      } finally {
        await a.end().catch(() => {})
        await b.end().catch(() => {})
        await this.clear()
      }
    },

    close: () => tbl.close(),
  }
}

module.exports = { name: 'handwritten', open }
