'use strict'
// bench/peers/claims.js - the claims half of bench/peers.sh (issue 39): job
// queues on one PostgreSQL, side by side in interleaved rounds.  Owns the
// runner only; each contender is an adapter in bench/peers/queues/ (the
// interface: queues/*.js export { name, open(ctx) -> q }, q.setup, enqueue,
// abandon, clear, backlog, run, latency, staleComplete, close; each
// adapter's header says what it does per call, in round trips).
//
// Contenders (CONTENDERS, space- or comma-separated; default all):
//   dlock-node       queues/dlock_node.js   the Node client's claim loop (work, wait)
//   dlock-py         queues/dlock_py.js     the Python client's claim loop (claims_py.py)
//   dlock-sql        queues/dlock_sql.js    dlock_claim / dlock_complete on raw pg
//   handwritten      queues/handwritten.js  the hand-written SKIP LOCKED side-table claim
//   pg-boss          queues/pgboss.js       pg-boss 12 through its API
//   graphile-worker  queues/graphile.js     graphile-worker 0.18 through its runner
// A contender whose adapter is missing or fails (to open, or in a run) is a
// failed contender: the others go on, and the runner exits non-zero at the
// end, naming it on stderr.
//
// Sections (SECTIONS, default "throughput abandoned latency safety"):
//   throughput  jobs fetched and completed per second at workers 1, 4, 16 x
//               batch 1, 20; ROUNDS interleaved rounds (per round, per cell,
//               every contender in turn), each run DURATION seconds, after
//               one unrecorded warm-up per contender (4 workers, batch 1).
//               The backlog is topped up (untimed) before every run to 1.5x
//               what the contender's best rate so far would drain, and a run
//               that drained it is run again once with twice as much.
//     {"section":"claims","contender":C,"round":R,"workers":W,"batch":B,"abandoned":false,"value":jobs_per_s}
//   abandoned   the same cells with 100,000 abandoned claims at the head of
//               each queue (clear, enqueue, abandon(100000) once per
//               contender, untimed; they stay for all rounds): "abandoned":true.
//               Both sections: 6 contenders x 6 cells x ROUNDS x DURATION
//               s = 324 s each at ROUNDS=3 DURATION=3, plus the top-ups,
//               warm-ups and the abandoning: some 13-15 minutes in all.
//   latency     insert-to-start with 4 idle workers on an empty queue, TRIALS
//               (100) trials per round and contender:
//     {"section":"claim_latency","contender":C,"round":R,"p50":ms,"p99":ms,"n":count}
//   safety      staleComplete() per contender:
//     {"section":"claim_safety","contender":C,"ok":bool,"detail":"..."}
// and first, per contender: {"section":"meta","contender":C,"detail":"..."}
// (the adapter's q.meta(), or its module's `meta`).
//
// PROFILE=1 adds, per throughput run, where the time goes (not part of
// bench/peers.sh's tables): {"section":"claims_profile", contender, workers,
// batch, abandoned, done, stmts_per_job (statements sent through node-postgres
// in this process: round trips; dlock-py reports its own), commits_per_job
// (pg_stat_database.xact_commit), wal_bytes_per_job, server_cpu_us_per_job
// (the postmaster's children, read in /proc: the server must be local),
// client_cpu_us_per_job, top (pg_stat_statements, when installed: calls and
// ms per job of the busiest statements)}.
//
// Environment: PGHOST PGPORT PGUSER PGDATABASE (PGPASSWORD), ROUNDS (3),
// DURATION (3), CONTENDERS, SECTIONS, TRIALS (100), PAYLOAD_BYTES (200), PROFILE;
// WORKERS, BATCHES ("1 4 16", "1 20": a subset for development).
// Only JSON lines on stdout; progress on stderr.  Every run is bounded by
// 10x its duration (+30 s): a hang fails its contender.  Nothing is asserted.

const path = require('path')
const fs = require('fs')

const ALL = ['dlock-node', 'dlock-py', 'dlock-sql', 'handwritten', 'pg-boss', 'graphile-worker']
const FILES = {
  'dlock-node': 'dlock_node.js',
  'dlock-py': 'dlock_py.js',
  'dlock-sql': 'dlock_sql.js',
  handwritten: 'handwritten.js',
  'pg-boss': 'pgboss.js',
  'graphile-worker': 'graphile.js',
}
const ABANDONED = 100000

const env = process.env
const list = (s, dflt) => (s && s.trim() ? s.trim().split(/[\s,]+/) : dflt)
const CONTENDERS = list(env.CONTENDERS, ALL)
const SECTIONS = list(env.SECTIONS, ['throughput', 'abandoned', 'latency', 'safety'])
const ROUNDS = Number(env.ROUNDS || 3)
const DURATION = Number(env.DURATION || 3)
const TRIALS = Number(env.TRIALS || 100)
const PROFILE = env.PROFILE === '1'
const WORKERS = list(env.WORKERS, ['1', '4', '16']).map(Number) // for development: a subset
const BATCHES = list(env.BATCHES, ['1', '20']).map(Number)
const ctx = {
  pg: {
    host: env.PGHOST || '127.0.0.1',
    port: Number(env.PGPORT || 5432),
    user: env.PGUSER || 'postgres',
    database: env.PGDATABASE || 'postgres',
  },
  payloadBytes: Number(env.PAYLOAD_BYTES || 200),
  log: (msg) => process.stderr.write(`claims: ${msg}\n`),
}
if (env.PGPASSWORD) ctx.pg.password = env.PGPASSWORD
const log = ctx.log

const emit = (o) => process.stdout.write(JSON.stringify(o) + '\n')
const failed = new Map() // contender -> why

function fail(c, why) {
  if (!failed.has(c)) failed.set(c, why)
  log(`${c} FAILED: ${why}`)
}

// promise bounded by ms: a hang is an error
function limit(promise, ms, what) {
  let t
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      t = setTimeout(() => reject(new Error(`${what}: no answer in ${Math.round(ms / 1000)} s (hung)`)), ms)
    }),
  ]).finally(() => clearTimeout(t))
}

const UNTIMED_MS = 600000 // setup, enqueue, abandon: generous, still bounded

function pct(sorted, p) {
  if (sorted.length === 0) return null
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  return sorted[i]
}
const r3 = (x) => (x === null ? null : Math.round(x * 1000) / 1000)

// ------------------------------------------------------------ profiling
let prof = null
async function profiler() {
  const { Client } = require('pg')
  const c = new Client(ctx.pg)
  c.on('error', () => {})
  await c.connect()
  let stmts = 0
  const orig = require('pg').Client.prototype.query
  require('pg').Client.prototype.query = function (...args) {
    if (this !== c) stmts++
    return orig.apply(this, args)
  }
  const pid = (await c.query('SELECT pg_backend_pid() AS p')).rows[0].p
  let pm = null
  try {
    pm = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ')[1]
  } catch (e) {
    log('profile: no /proc for the server (not local?): no server CPU')
  }
  const pss = (await c.query("SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'")).rows.length > 0
  const tick = 1e6 / 100 // us per clock tick (CLK_TCK 100 on Linux)
  function serverCpu() {
    if (!pm) return null
    let us = 0
    for (const d of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue
      let st
      try {
        st = fs.readFileSync(`/proc/${d}/stat`, 'utf8').replace(/^.*\) /, '').split(' ')
      } catch (e) {
        continue
      }
      if (d === pm) us += (Number(st[13]) + Number(st[14])) * tick // children that exited
      else if (st[1] === pm) us += (Number(st[11]) + Number(st[12])) * tick
    }
    return us
  }
  async function snap() {
    const r = (await c.query(`SELECT xact_commit::bigint AS x, pg_current_wal_lsn() AS l
      FROM pg_stat_database WHERE datname = current_database()`)).rows[0]
    return { stmts, x: Number(r.x), lsn: r.l, cpu: process.cpuUsage(), scpu: serverCpu() }
  }
  return {
    async start() {
      if (pss) await c.query('SELECT pg_stat_statements_reset()')
      await c.query('SELECT pg_stat_force_next_flush()').catch(() => {})
      return snap()
    },
    async stop(s0, done, extra) {
      await new Promise((r) => setTimeout(r, 1100)) // backends' stats flushed (at most 1 s)
      const s1 = await snap()
      const d = Math.max(done, 1)
      const wal = Number((await c.query('SELECT pg_wal_lsn_diff($1, $2) AS d', [s1.lsn, s0.lsn])).rows[0].d)
      const cu = (s1.cpu.user - s0.cpu.user + s1.cpu.system - s0.cpu.system)
      const out = {
        stmts_per_job: extra && extra.stmts !== undefined ? r3(extra.stmts / d) : r3((s1.stmts - s0.stmts) / d),
        commits_per_job: r3((s1.x - s0.x - 2) / d),
        wal_bytes_per_job: Math.round(wal / d),
        server_cpu_us_per_job: s0.scpu === null ? null : Math.round((s1.scpu - s0.scpu) / d),
        client_cpu_us_per_job: Math.round((extra && extra.clientCpuUs !== undefined ? extra.clientCpuUs : cu) / d),
      }
      if (pss) {
        const top = await c.query(`SELECT calls, total_exec_time AS t, regexp_replace(query, '\\s+', ' ', 'g') AS q
          FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat%' ORDER BY total_exec_time DESC LIMIT 6`)
        out.top = top.rows.map((r) => ({ calls_per_job: r3(Number(r.calls) / d), ms_per_job: r3(r.t / d), q: r.q.slice(0, 90) }))
      }
      return out
    },
    close: () => c.end(),
  }
}

// ------------------------------------------------------------ the runner
async function openAll() {
  const open = []
  for (const c of CONTENDERS) {
    const file = path.join(__dirname, 'queues', FILES[c] || `${c.replace(/-/g, '_')}.js`)
    if (!fs.existsSync(file)) {
      fail(c, `no adapter (${path.relative(process.cwd(), file)})`)
      continue
    }
    try {
      const mod = require(file)
      const q = await limit(mod.open(ctx), UNTIMED_MS, `${c} open`)
      await limit(q.setup(), UNTIMED_MS, `${c} setup`)
      let detail = typeof q.meta === 'function' ? await q.meta() : mod.meta
      if (!detail) detail = 'the adapter says nothing of its settings'
      emit({ section: 'meta', contender: c, detail: String(detail) })
      open.push({ c, q, best: 0 })
    } catch (err) {
      fail(c, `open/setup: ${err && err.stack ? err.stack : err}`)
    }
  }
  return open
}

const alive = (list) => list.filter((x) => !failed.has(x.c))

// tops the backlog up to what 1.5x the best rate so far drains in `seconds`
async function topUp(x, seconds, factor = 1) {
  const want = Math.ceil(Math.max(x.best, 2000) * 1.5 * seconds * factor) + 1000
  const have = await limit(x.q.backlog(), UNTIMED_MS, `${x.c} backlog`)
  if (have < want) await limit(x.q.enqueue(want - have), UNTIMED_MS, `${x.c} enqueue`)
}

async function runOnce(x, workers, batch, seconds, abandoned) {
  let factor = 1
  for (let attempt = 0; ; attempt++) {
    await topUp(x, seconds, factor)
    const p0 = prof ? await prof.start() : null
    const res = await limit(x.q.run({ workers, batch, seconds }), (10 * seconds + 30) * 1000, `${x.c} run`)
    const rate = res.done / seconds
    const left = await limit(x.q.backlog(), UNTIMED_MS, `${x.c} backlog`)
    if (rate > x.best) x.best = rate
    if (left > 0 || attempt > 0) {
      if (left === 0) log(`${x.c}: the backlog ran dry twice (w${workers} b${batch}); the rate is a floor`)
      if (prof) {
        const p = await prof.stop(p0, res.done, res)
        emit({ section: 'claims_profile', contender: x.c, workers, batch, abandoned, done: res.done, ...p })
      }
      return rate
    }
    log(`${x.c}: the backlog ran dry (w${workers} b${batch}): again with twice as much`)
    factor = 2
  }
}

async function throughput(open, abandoned) {
  const sec = abandoned ? 'abandoned' : 'throughput'
  for (const x of alive(open)) {
    try {
      await limit(x.q.clear(), UNTIMED_MS, `${x.c} clear`)
      if (abandoned) {
        log(`${x.c}: ${ABANDONED} abandoned claims at the head of the queue`)
        const t0 = Date.now()
        await limit(x.q.enqueue(ABANDONED), UNTIMED_MS, `${x.c} enqueue`)
        await limit(x.q.abandon(ABANDONED), UNTIMED_MS, `${x.c} abandon`)
        log(`${x.c}: abandoned in ${((Date.now() - t0) / 1000).toFixed(1)} s`)
      }
      log(`${sec}: ${x.c} warm-up`)
      await runOnce(x, 4, 1, Math.min(DURATION, 2), abandoned)
    } catch (err) {
      fail(x.c, `${sec} preparation: ${err && err.stack ? err.stack : err}`)
    }
  }
  for (let round = 1; round <= ROUNDS; round++) {
    for (const workers of WORKERS) {
      for (const batch of BATCHES) {
        for (const x of alive(open)) {
          try {
            const v = await runOnce(x, workers, batch, DURATION, abandoned)
            log(`${sec} r${round} w${workers} b${batch} ${x.c}: ${Math.round(v)} jobs/s`)
            emit({ section: 'claims', contender: x.c, round, workers, batch, abandoned, value: Math.round(v * 10) / 10 })
          } catch (err) {
            fail(x.c, `${sec} w${workers} b${batch}: ${err && err.stack ? err.stack : err}`)
          }
        }
      }
    }
  }
}

async function latency(open) {
  for (const x of alive(open)) {
    try {
      await limit(x.q.clear(), UNTIMED_MS, `${x.c} clear`)
    } catch (err) {
      fail(x.c, `latency clear: ${err && err.stack ? err.stack : err}`)
    }
  }
  for (let round = 1; round <= ROUNDS; round++) {
    for (const x of alive(open)) {
      try {
        const v = await limit(x.q.latency({ workers: 4, trials: TRIALS }), (TRIALS * 10 + 60) * 1000, `${x.c} latency`)
        const s = v.slice().sort((a, b) => a - b)
        log(`latency r${round} ${x.c}: p50 ${r3(pct(s, 50))} ms p99 ${r3(pct(s, 99))} ms (${s.length})`)
        emit({ section: 'claim_latency', contender: x.c, round, p50: r3(pct(s, 50)), p99: r3(pct(s, 99)), n: s.length })
      } catch (err) {
        fail(x.c, `latency: ${err && err.stack ? err.stack : err}`)
      }
    }
  }
}

async function safety(open) {
  for (const x of alive(open)) {
    try {
      await limit(x.q.clear(), UNTIMED_MS, `${x.c} clear`)
      const r = await limit(x.q.staleComplete(), 120000, `${x.c} staleComplete`)
      log(`safety ${x.c}: ${r.ok ? 'refused' : 'ACCEPTED'}: ${r.detail}`)
      emit({ section: 'claim_safety', contender: x.c, ok: !!r.ok, detail: String(r.detail) })
    } catch (err) {
      fail(x.c, `safety: ${err && err.stack ? err.stack : err}`)
    }
  }
}

async function main() {
  const t0 = Date.now()
  log(`contenders ${CONTENDERS.join(' ')}; sections ${SECTIONS.join(' ')}; ROUNDS=${ROUNDS} DURATION=${DURATION}`)
  if (PROFILE) prof = await profiler()
  const open = await openAll()
  for (const s of SECTIONS) {
    const t = Date.now()
    if (s === 'throughput') await throughput(open, false)
    else if (s === 'abandoned') await throughput(open, true)
    else if (s === 'latency') await latency(open)
    else if (s === 'safety') await safety(open)
    else fail(`section ${s}`, 'unknown section')
    log(`section ${s} took ${Math.round((Date.now() - t) / 1000)} s`)
  }
  for (const x of open) {
    try {
      await limit(x.q.clear(), UNTIMED_MS, `${x.c} clear`)
      await limit(x.q.close(), 60000, `${x.c} close`)
    } catch (err) {
      log(`${x.c}: close: ${err && err.message}`)
    }
  }
  if (prof) await prof.close()
  log(`done in ${Math.round((Date.now() - t0) / 1000)} s`)
  if (failed.size) {
    log(`failed contenders: ${[...failed.keys()].join(', ')}`)
    process.exit(1)
  }
  process.exit(0)
}

main().catch((err) => {
  log(`runner: ${err && err.stack ? err.stack : err}`)
  process.exit(2)
})
