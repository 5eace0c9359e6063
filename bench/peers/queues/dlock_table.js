'use strict'
// bench/peers/queues/dlock_table.js - what the dlock contenders of
// bench/peers/claims.js share (not a contender itself): the job table every
// dlock contender has one of, its untimed chores (setup, enqueue, abandon,
// clear, backlog) and the latency harness.  Owned by the claims runner.
//
// The table, as a dlock user makes it (README's `sms` example, the queue
// index of bench/claim_bench.sh):
//   CREATE TABLE T (id bigserial PRIMARY KEY, payload jsonb NOT NULL,
//                   status int NOT NULL DEFAULT 0,
//                   created_at timestamptz NOT NULL DEFAULT now());
//   CREATE INDEX ON T (id) WHERE status = 0;       -- the jobs still to do
//   SELECT dlock_claim_wakeup('T');                -- commits wake waiting claims
// A job is to do while status = 0; done: status = 1 (kept, as pg-boss keeps
// its completed jobs).  Claims run in dlock's default order (the primary
// key: oldest first).  Abandoned claims: dlock_claim(NULL::T, 'dead', 1000,
// '1 hour', 'status = 0') committed and never completed, repeated.

const { Pool, Client } = require('pg')

const FILTER = 'status = 0'
const DEAD = 'dead'

// a JSON text of exactly `bytes` bytes: {"p":"xxx..."}
function payloadJson(bytes) {
  return `{"p":"${'x'.repeat(Math.max(0, bytes - 8))}"}`
}

function hr() {
  return process.hrtime.bigint()
}

const ms = (a, b) => Number(b - a) / 1e6

// a pool of `max` connections, all opened before it is returned (so that no
// connection is made inside a timed window)
async function warmPool(pgcfg, max) {
  const pool = new Pool({ ...pgcfg, max, idleTimeoutMillis: 0 })
  pool.on('error', () => {})
  const cs = []
  for (let i = 0; i < max; i++) cs.push(await pool.connect())
  for (const c of cs) c.release()
  return pool
}

class DlockTable {
  constructor(ctx, table) {
    this.ctx = ctx
    this.table = table
    this.pgcfg = { host: ctx.pg.host, port: ctx.pg.port, user: ctx.pg.user, database: ctx.pg.database }
    if (ctx.pg.password) this.pgcfg.password = ctx.pg.password
    this.payload = payloadJson(ctx.payloadBytes || 200)
    this.admin = null
  }

  async connect() {
    this.admin = new Client(this.pgcfg)
    this.admin.on('error', () => {})
    await this.admin.connect()
    // backlog() reads the dlock_claims view beside a count that the planner
    // may run in parallel: dlock_claims() is PARALLEL RESTRICTED but takes a
    // fresh snapshot ("cannot update SecondarySnapshot during a parallel
    // operation"), so these chores run without parallel plans
    await this.admin.query('SET max_parallel_workers_per_gather = 0')
  }

  q(text, values) {
    return this.admin.query(text, values)
  }

  async setup() {
    const t = this.table
    await this.q(`CREATE TABLE IF NOT EXISTS ${t} (id bigserial PRIMARY KEY, payload jsonb NOT NULL,
      status int NOT NULL DEFAULT 0, created_at timestamptz NOT NULL DEFAULT now())`)
    await this.q(`CREATE INDEX IF NOT EXISTS ${t}_todo ON ${t} (id) WHERE status = 0`)
    await this.q(`SELECT dlock_claim_wakeup('${t}')`)
    await this.clear()
  }

  async enqueue(n) {
    for (let left = n; left > 0; left -= 50000) {
      await this.q(`INSERT INTO ${this.table} (payload) SELECT $1::jsonb FROM generate_series(1, $2)`,
        [this.payload, Math.min(left, 50000)])
    }
  }

  // the first n jobs (dlock's default order: the primary key) claimed for an
  // hour by a holder that never comes back; each call commits
  async abandon(n) {
    let got = 0
    while (got < n) {
      const r = await this.q(`SELECT count(*)::int AS c FROM dlock_claim(NULL::${this.table}, $1, $2, '1 hour', $3)`,
        [DEAD, Math.min(1000, n - got), FILTER])
      if (r.rows[0].c === 0) throw new Error(`abandon: only ${got} of ${n} jobs to claim`)
      got += r.rows[0].c
    }
    await this.q(`VACUUM ANALYZE ${this.table}`)
  }

  async clear() {
    // the dead holder's claims forgotten (dlock_reset_claims, the operators'
    // call: given back with dlock_unclaim, 100,000 free claim rows would stay
    // in dlock.claim for dlock.idle_key_lifetime, and every waiting claim's
    // next-lapse lookup reads them all: insert-to-start p50 25-90 ms instead of
    // 1 ms), then every job gone; ids are never reused
    await this.q(`SELECT dlock_reset_claims('${this.table}', ARRAY(SELECT key::bigint FROM dlock_claims
      WHERE table_name = '${this.table}'::regclass AND holder = $1))`, [DEAD])
    await this.q(`TRUNCATE ${this.table}`)
    await this.q(`VACUUM ANALYZE ${this.table}`)
  }

  async backlog() {
    const r = await this.q(`SELECT (SELECT count(*) FROM ${this.table} WHERE status = 0)
      - (SELECT count(*) FROM dlock_claims WHERE table_name = '${this.table}'::regclass AND holder = $1) AS n`, [DEAD])
    return Number(r.rows[0].n)
  }

  // one job inserted by an autocommit statement; its id and the moment the
  // commit returned
  async insertOne(client) {
    const r = await client.query(`INSERT INTO ${this.table} (payload) VALUES ($1::jsonb) RETURNING id`, [this.payload])
    return { id: String(r.rows[0].id), at: hr() }
  }

  async close() {
    if (this.admin) await this.admin.end().catch(() => {})
    this.admin = null
  }
}

// The latency harness: start(onStart) starts the idle workers (each calls
// onStart(id) when a handler starts on a job) and resolves once they wait;
// stop() stops them all.  Per trial one job is inserted (autocommit) on a
// connection of its own; the latency is from the insert's return to the
// handler's start, on this process's clock; trials spaced 20-50 ms.
async function latencyTrials(tbl, trials, start, stop) {
  const starts = new Map() // id -> hrtime of the handler's start
  const waiting = new Map() // id -> resolve
  const onStart = (id) => {
    const k = String(id)
    starts.set(k, hr())
    const w = waiting.get(k)
    if (w) w()
  }
  await start(onStart)
  await new Promise((r) => setTimeout(r, 300)) // the workers are waiting
  const ins = new Client(tbl.pgcfg)
  ins.on('error', () => {})
  await ins.connect()
  const out = []
  try {
    for (let i = 0; i < trials; i++) {
      const { id, at } = await tbl.insertOne(ins)
      if (!starts.has(id)) {
        await new Promise((resolve, reject) => {
          const t = setTimeout(() => reject(new Error(`latency: job ${id} not started within 10 s`)), 10000)
          waiting.set(id, () => { clearTimeout(t); resolve() })
          if (starts.has(id)) { clearTimeout(t); resolve() }
        })
        waiting.delete(id)
      }
      out.push(ms(at, starts.get(id)))
      await new Promise((r) => setTimeout(r, 20 + Math.random() * 30))
    }
  } finally {
    await ins.end().catch(() => {})
    await stop()
  }
  return out
}

// run() of an adapter whose startWorkers(workers, batch, onRows, onDone)
// starts workers that call onDone(k) after completing k jobs and returns
// { stop() }: the jobs completed within `seconds`
async function timedRun(startWorkers, { workers, batch, seconds }) {
  let done = 0
  let end = null
  const w = await startWorkers(workers, batch, null, (k) => {
    if (hr() <= end) done += k
  })
  end = hr() + BigInt(Math.round(seconds * 1e9))
  await new Promise((r) => setTimeout(r, seconds * 1000))
  await w.stop()
  return { done }
}

// latency() of such an adapter: workers that call onRows(rows) as they
// start on the rows they claimed
function workersLatency(tbl, startWorkers, { workers, trials }) {
  let w = null
  return latencyTrials(tbl, trials, async (onStart) => {
    w = await startWorkers(workers, 1, (rows) => {
      for (const r of rows) onStart(r.id)
    }, null)
  }, () => w.stop())
}

// the untimed chores of an adapter, which a DlockTable does
function chores(tbl) {
  return {
    setup: () => tbl.setup(),
    enqueue: (n) => tbl.enqueue(n),
    abandon: (n) => tbl.abandon(n),
    clear: () => tbl.clear(),
    backlog: () => tbl.backlog(),
  }
}

module.exports = { DlockTable, latencyTrials, timedRun, workersLatency, chores, warmPool, payloadJson, hr, ms, FILTER, DEAD }
