'use strict'
// bench/peers/queues/dlock_py.js - contender "dlock-py" of
// bench/peers/claims.js: dlock's row claims through the Python client's
// claim loop.  The work is done by bench/peers/claims_py.py (its header
// says what it does, per call, in round trips: 5 per batch, 2 commits),
// self-contained: its own worker threads, inserts and clock; this adapter
// starts it once per run (python3, clients/python/src on PYTHONPATH,
// Debian's psycopg 3) and reads its one JSON answer.  The untimed chores
// (table, enqueue, abandon, clear, backlog) are queues/dlock_table.js's on
// table peers_dlock_py_jobs.  Owned by the claims runner's author.
//
// Settings: dlock.claims(dsn, table, holder, n=batch, ttl=30,
// filter='status = 0', wait=10, stop=event) per worker thread: idle loops
// wait in dlock_claim (woken by dlock_claim_wakeup's trigger; no polling, no
// LISTEN).  The Python process's start (imports) is outside the window;
// each loop's own connection is made at its first claim, inside it.

const path = require('path')
const { spawn } = require('child_process')
const { DlockTable, chores } = require('./dlock_table')

const TABLE = 'peers_dlock_py_jobs'
const SCRIPT = path.join(__dirname, '..', 'claims_py.py')
const PYPATH = path.join(__dirname, '..', '..', '..', 'clients', 'python', 'src')
// Debian's python3 (its psycopg 3): not a python3 found first on PATH (pyenv)
const PYTHON = process.env.PYTHON || (require('fs').existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3')

function py(args, timeoutMs) {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, PYTHONPATH: PYPATH + (process.env.PYTHONPATH ? `:${process.env.PYTHONPATH}` : '') }
    const p = spawn(PYTHON, [SCRIPT, JSON.stringify(args)], { env, stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    p.stdout.on('data', (d) => { out += d })
    const t = setTimeout(() => {
      p.kill('SIGCONT')
      p.kill('SIGKILL')
      reject(new Error(`claims_py.py ${args.cmd}: no answer in ${timeoutMs / 1000} s`))
    }, timeoutMs)
    p.on('error', (e) => { clearTimeout(t); reject(e) })
    p.on('close', (code) => {
      clearTimeout(t)
      if (code !== 0) return reject(new Error(`claims_py.py ${args.cmd} exited ${code}`))
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()))
      } catch (e) {
        reject(new Error(`claims_py.py ${args.cmd}: no JSON answer: ${out.slice(0, 200)}`))
      }
    })
  })
}

async function open(ctx) {
  const tbl = new DlockTable(ctx, TABLE)
  await tbl.connect()
  const c = tbl.pgcfg
  const dsn = `host=${c.host} port=${c.port} user=${c.user} dbname=${c.database}` + (c.password ? ` password=${c.password}` : '')
  const base = { dsn, table: TABLE, payload: tbl.payload }
  return {
    meta: async () => {
      const v = (await tbl.q("SELECT extversion FROM pg_extension WHERE extname = 'dlock'")).rows[0].extversion
      const pv = await py({ ...base, cmd: 'version' }, 30000).catch(() => ({}))
      return `dlock Python client ${pv.dlock || '?'} (psycopg ${pv.psycopg || '?'}, Python ${pv.python || '?'}) on dlock ${v}: ` +
        `a thread per worker with dlock.claims(n = batch, ttl 30 s, wait 10 s: idle loops wait in dlock_claim, woken by ` +
        "dlock_claim_wakeup's trigger; no polling, no LISTEN); completion with conn.transaction(): batch.complete(keys, cursor); " +
        'UPDATE status = 1 (5 round trips, 2 commits per batch)'
    },
    ...chores(tbl),
    async run({ workers, batch, seconds }) {
      const r = await py({ ...base, cmd: 'run', workers, batch, seconds }, (seconds * 10 + 60) * 1000)
      return { done: r.done, clientCpuUs: r.cpu_us }
    },
    async latency({ workers, trials }) {
      return (await py({ ...base, cmd: 'latency', workers, trials }, (trials * 10 + 60) * 1000)).ms
    },
    async staleComplete() {
      await tbl.clear()
      await tbl.enqueue(1)
      try {
        return await py({ ...base, cmd: 'stale' }, 60000)
      } finally {
        await tbl.clear()
      }
    },
    close: () => tbl.close(),
  }
}

module.exports = { name: 'dlock-py', open }
