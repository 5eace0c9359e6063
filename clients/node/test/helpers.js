'use strict'
// Helpers of the tests: a real server started by scripts/test-clients.sh,
// which passes it in the environment (DLOCK_TEST_DSN, DLOCK_TEST_BOUNCER_DSN,
// DLOCK_TEST_PGCTL, DLOCK_TEST_SERVER_LOG, DLOCK_TEST_DEAD_PORT).

const fs = require('fs')
const crypto = require('crypto')
const { execFileSync } = require('child_process')
const { Pool } = require('pg')

function env(name) {
  const v = process.env[name]
  if (!v) throw new Error(`${name} is not set: run the tests through scripts/test-clients.sh`)
  return v
}

// "host=... port=... user=... dbname=..." as a pg config
function config(dsn) {
  const c = {}
  for (const kv of dsn.trim().split(/\s+/)) {
    const [k, v] = kv.split('=')
    c[k === 'dbname' ? 'database' : k] = k === 'port' ? Number(v) : v
  }
  return c
}

function pool(dsn, extra) {
  const p = new Pool({ ...config(dsn), max: 4, ...extra })
  p.on('error', () => {}) // idle clients die with a server restart
  return p
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function waitUntil(cond, ms, step = 50) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await cond()) return true
    await sleep(step)
  }
  return cond()
}

const key = () => `nodetest/${crypto.randomBytes(6).toString('hex')}`

const server = {
  stop() { execFileSync(env('DLOCK_TEST_PGCTL'), ['stop'], { stdio: 'ignore' }) },
  async start() {
    execFileSync(env('DLOCK_TEST_PGCTL'), ['start'], { stdio: 'ignore' })
    const p = pool(env('DLOCK_TEST_DSN'), { max: 1 })
    try {
      await waitUntil(() => p.query('SELECT 1').then(() => true, () => false), 60000, 100)
    } finally {
      await p.end()
    }
  },
  logMark() { return fs.statSync(env('DLOCK_TEST_SERVER_LOG')).size },
  logSince(mark) {
    const fd = fs.openSync(env('DLOCK_TEST_SERVER_LOG'), 'r')
    try {
      const size = fs.fstatSync(fd).size
      const buf = Buffer.alloc(Math.max(0, size - mark))
      fs.readSync(fd, buf, 0, buf.length, mark)
      return buf.toString('utf8')
    } finally {
      fs.closeSync(fd)
    }
  },
}

// The statements of a piece of the server's log (log_line_prefix
// '%m [%p] %qvxid=%v %a ', set by scripts/test-clients.sh), in order:
// { pid, vxid (the virtual transaction id: one per transaction), text (the
// statement), detail (its parameters, if any) }; a DETAIL line belongs to
// the record of its pid before it.
function logRecords(text) {
  const out = []
  const last = new Map()
  for (const line of text.split('\n')) {
    const m = /^\S+ \S+ \S+ \[(\d+)\] vxid=(\S*) .*?(LOG|DETAIL|ERROR|STATEMENT|HINT|CONTEXT): {2}(.*)$/.exec(line)
    if (!m) continue
    const [, pid, vxid, level, rest] = m
    const s = /^(statement|execute [^:]*): (.*)$/.exec(rest)
    if (level === 'LOG' && s) {
      const rec = { pid, vxid, text: s[2], detail: '' }
      out.push(rec)
      last.set(pid, rec)
    } else if (level === 'DETAIL' && last.has(pid)) {
      last.get(pid).detail += rest
    }
  }
  return out
}

async function holderOf(db, k) {
  const r = await db.query('SELECT holder, token FROM dlock_locks WHERE key = $1', [k])
  return r.rows.length ? [r.rows[0].holder, r.rows[0].token] : null
}

// The rows of dlock_claims on table (only its own: other tests leave rows
// in their backoff), key -> 'live' (a holder's unexpired claim),
// 'backoff' (no holder, claimable again only later: given back as failed)
// or 'other'.
async function claimsOf(db, table) {
  const r = await db.query(`SELECT key, CASE WHEN holder IS NOT NULL AND expires_at > clock_timestamp() THEN 'live'
      WHEN holder IS NULL AND retry_at > clock_timestamp() THEN 'backoff' ELSE 'other' END AS state
    FROM dlock_claims WHERE table_name = $1::regclass ORDER BY key`, [table])
  return Object.fromEntries(r.rows.map((x) => [x.key, x.state]))
}

module.exports = { env, config, pool, sleep, waitUntil, key, server, holderOf, logRecords, claimsOf }
