'use strict'
// bench/peers/locks.js: the lock half of bench/peers.sh (issue 39): dlock
// beside etcd, Redis (redlock) and PostgreSQL advisory locks, all from
// Node, each through its own client as its README shows it.  This file
// owns the sections `pairs`, `hot`, `handoff` and `safety` (printed as
// "lock_safety") and one `meta` line per contender.
//
// Environment (the contract with bench/peers.sh): PGHOST PGPORT PGUSER
// PGDATABASE, ETCD_ENDPOINT (host:port), REDIS_ALWAYS_PORT,
// REDIS_EVERYSEC_PORT, ROUNDS (3), DURATION (s per timed run, 3),
// CONTENDERS (space-separated subset; unset: all), SECTIONS (subset of
// pairs hot handoff safety; unset: all).  HANDOFF_TRIALS (100): hand-offs
// per round.  Output: one JSON object per line on stdout; progress on
// stderr; exit 1 if any contender failed to run (after printing the rest).
//
// Contenders, with what one call costs in client-server round trips (RT):
// - dlock-node: pg-dlock (clients/node) as its README shows it:
//   `acquire(pool, key, {ttl, wait})` then `lease.release()`.  A lease
//   runs on a connection of its own, kept after its release for the pool's
//   next lease (the first lease of a client opens it: TCP connect, startup,
//   auth, a backend fork), acquires on it (1 RT: dlock_acquire) and
//   releases on it (1 RT: dlock_release).  The pool given (max 1 per
//   client) is only the settings: never used.
//   Renewal every ttl/3 on the lease's connection (none within a pair).
// - dlock-sql: raw pg, one connection per client: SELECT dlock_acquire(key,
//   holder, ttl, wait) (1 RT; a token or NULL), SELECT dlock_release(key,
//   holder, token) (1 RT).  Unnamed statements (parse/bind/execute in one RT).
// - etcd: etcd3's `client.lock(key).ttl(s).acquire()` / `release()`, one
//   Etcd3 client (gRPC channel) per client.  acquire = LeaseGrant (1 RT,
//   a raft write) + a Txn "create revision of key == 0 then put key with
//   the lease" (1 RT, a raft write); etcd3 also opens a LeaseKeepAlive
//   stream at once and sends one keep-alive, beside the Txn.  release =
//   LeaseRevoke (1 RT, a raft write).  etcd3's Lock does not wait: a key
//   already held makes acquire() revoke its lease (1 RT) and reject with
//   EtcdLockFailedError.  Where a lock must wait (hot, handoff, the
//   safety probe's taker) the caller waits as etcd's own Go
//   concurrency.Mutex and `etcdctl lock` do, for the key's deletion: a
//   watch on the key (created on the client's watch stream, 1 RT), a read
//   of the key (1 RT: gone already?), the watch's delete event, the watch's
//   cancel (1 RT), then tries again; up to 10 s (the wait dlock gets).
//   (Trying again at once instead, 3 raft writes a try, drowned etcd:
//   16 clients on a hot key made 8.5 pairs/s.)  All waiters wake at a
//   release and race for the key: no FIFO.
// - redlock / redlock-everysec: redlock 4.2.0 with ioredis, one Redis
//   instance, defaults as shipped (retryCount 10, retryDelay 200 ms,
//   retryJitter 100 ms, driftFactor 0.01): `redlock.lock(resource, ttlMs)`
//   = 1 RT (EVALSHA of its SET-if-absent script); a refused try also
//   unlocks (1 RT) and sleeps 100-300 ms before the next, up to 11 tries,
//   then LockError.  `lock.unlock()` = 1 RT (EVALSHA compare-and-delete).
//   redlock: Redis with appendonly yes, appendfsync always (durable);
//   redlock-everysec: appendfsync everysec (not durable: a crash loses up
//   to a second of locks, which can then be taken twice).
// - advisory: raw pg, one connection per client: SELECT
//   pg_advisory_lock(hashtext(key)) (1 RT; waits in the server) and SELECT
//   pg_advisory_unlock(hashtext(key)) (1 RT).  Session locks, no ttl, no
//   token, nothing written: the no-ttl reference, not a contender for the
//   targets.
// ttl 30 s for all (etcd's lease TTL in seconds, redlock's in ms).
//
// Sections:
// - pairs: N clients (1, 4, 16), each its own connection / client, each
//   looping acquire + release of a fresh random key (64 random bits) for
//   DURATION s; value = pairs completed by the deadline / DURATION.
// - hot: N clients (4, 16) looping acquire (waiting as the tool waits:
//   dlock wait 10 s, advisory blocks, etcd watches and tries again, redlock retries as
//   shipped) + release of one key; value = pairs/s.  Acquires that gave up
//   (redlock's LockError after its 11 tries, a dlock wait that ran out)
//   are not pairs; their count goes to stderr.
// - handoff: a holder holds a fresh key; a waiter starts acquiring it
//   (for dlock and advisory: until the server shows it queued); the holder
//   holds 20-320 ms more (uniform: the release lands anywhere in redlock's
//   retry period) and releases.  Latency = the waiter's acquire resolving
//   minus the holder's release resolving, on one clock (hrtime, one
//   process); negative when the grant's reply is read before the release's.
// - safety: a holder A (ttl 2 s; etcd's minimum lease ttl rounds up to
//   about 2 s) whose process stops for ttl + 2 s (the event loop blocked,
//   as by a GC pause: no renewal or keep-alive runs), while a taker B in
//   another process keeps acquiring the same key.  When A resumes it
//   writes to a row of a PostgreSQL table at once, with what its tool gave
//   it.  ok = that stale write was refused.

const { fork } = require('child_process')
const crypto = require('crypto')
const pg = require('pg')
const dlock = require('pg-dlock')
const { Etcd3, EtcdLockFailedError } = require('etcd3')
const Redis = require('ioredis')
const Redlock = require('redlock')

const ALL = ['dlock-node', 'dlock-sql', 'etcd', 'redlock', 'redlock-everysec', 'advisory']
const ALL_SECTIONS = ['pairs', 'hot', 'handoff', 'safety']
const TTL = 30 // s, every contender
const WAIT = 10 // s, how long a waiting acquire may wait (dlock's wait, etcd's tries)
const SAFETY_TTL = 2 // s
const PG = {
  host: process.env.PGHOST || '127.0.0.1',
  port: Number(process.env.PGPORT || 5432),
  user: process.env.PGUSER || 'postgres',
  database: process.env.PGDATABASE || 'postgres',
}
const ETCD = process.env.ETCD_ENDPOINT || '127.0.0.1:2379'
const REDIS_PORT = {
  redlock: Number(process.env.REDIS_ALWAYS_PORT || 6379),
  'redlock-everysec': Number(process.env.REDIS_EVERYSEC_PORT || 6380),
}
const ROUNDS = Number(process.env.ROUNDS || 3)
const DURATION = Number(process.env.DURATION || 3)
const TRIALS = Number(process.env.HANDOFF_TRIALS || 100)

const noop = () => {}
const now = () => process.hrtime.bigint()
const ms = (a, b) => Number(b - a) / 1e6
const sleep = (t) => new Promise((resolve) => setTimeout(resolve, t))
const rand = () => crypto.randomBytes(8).toString('hex')
const log = (...a) => process.stderr.write(`locks: ${a.join(' ')}\n`)
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n')

function list(env, all, what) {
  const v = (process.env[env] || '').trim()
  if (!v) return all.slice()
  const got = v.split(/\s+/)
  const bad = got.filter((x) => !all.includes(x))
  if (bad.length) {
    log(`unknown ${what}: ${bad.join(' ')} (known: ${all.join(' ')})`)
    process.exit(2)
  }
  return all.filter((x) => got.includes(x))
}

// rejects if p has not settled within t ms: catches hangs only
function limit(p, t, what) {
  let timer
  const late = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no end after ${t / 1000} s (hung)`)), t)
  })
  return Promise.race([p, late]).finally(() => clearTimeout(timer))
}

// ---------------------------------------------------------------- contenders
// open() -> a session: one client of the tool (its own connection, pool or
// channel).  session.acquire(key, {ttl, wait}) -> a handle, or null when
// the tool gave up (dlock's wait ran out, redlock's retries, etcd's tries
// for WAIT s); session.release(handle); session.close().

function pgSession(make) {
  return async () => {
    const client = new pg.Client(PG)
    client.on('error', noop)
    await client.connect()
    return Object.assign(make(client), { client, close: () => client.end() })
  }
}

let sqlHolders = 0

// etcd: resolves once key is absent (its holder's lease revoked or
// expired), or at end: a watch on key (created on the client's watch
// stream: 1 RT), a range read of key (1 RT: absent already?), the watch's
// 'delete' event, then the watch's cancel (1 RT).  How etcd's own
// concurrency.Mutex and `etcdctl lock` wait (for the deletion of the key
// before theirs).
async function etcdGone(client, key, end) {
  const watcher = await client.watch().key(key).create()
  try {
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, Math.max(0, ms(now(), end)))
      const done = () => {
        clearTimeout(timer)
        resolve()
      }
      watcher.on('delete', done)
      client.get(key).exec().then((r) => {
        if (r.kvs.length === 0) done()
      }, done)
    })
  } finally {
    await watcher.cancel().catch(noop)
  }
}

const KINDS = {
  'dlock-node': {
    async open() {
      const pool = new pg.Pool({ ...PG, max: 1 })
      pool.on('error', noop)
      return {
        pool,
        async acquire(key, { ttl = TTL, wait = WAIT } = {}) {
          try {
            return await dlock.acquire(pool, key, { ttl, wait })
          } catch (err) {
            if (err instanceof dlock.NotAcquiredError) return null
            throw err
          }
        },
        async release(lease) {
          const r = await lease.release()
          if (r !== true) throw new Error(`lease.release() answered ${r}`)
        },
        close: () => pool.end(),
      }
    },
  },
  'dlock-sql': {
    open: pgSession((client) => {
      const holder = `sql-${process.pid}-${++sqlHolders}`
      return {
        holder,
        async acquire(key, { ttl = TTL, wait = WAIT } = {}) {
          const r = await client.query('SELECT dlock_acquire($1, $2, $3::interval, $4::interval) AS t',
            [key, holder, `${ttl} s`, `${wait} s`])
          const token = r.rows[0].t
          return token === null ? null : { key, token }
        },
        async release(h) {
          const r = await client.query('SELECT dlock_release($1, $2, $3) AS ok', [h.key, holder, h.token])
          if (r.rows[0].ok !== true) throw new Error(`dlock_release answered ${r.rows[0].ok}`)
        },
      }
    }),
  },
  etcd: {
    async open() {
      const client = new Etcd3({ hosts: ETCD })
      return {
        client,
        async acquire(key, { ttl = TTL, wait = WAIT } = {}) {
          const end = now() + BigInt(Math.round(wait * 1e9))
          for (;;) {
            const lock = client.lock(key).ttl(ttl)
            try {
              return await lock.acquire()
            } catch (err) {
              if (!(err instanceof EtcdLockFailedError)) throw err
            }
            if (now() >= end) return null
            await etcdGone(client, key, end)
          }
        },
        release: (lock) => lock.release(),
        close: async () => client.close(),
      }
    },
  },
  advisory: {
    open: pgSession((client) => ({
      async acquire(key) {
        await client.query('SELECT pg_advisory_lock(hashtext($1))', [key])
        return { key }
      },
      async release(h) {
        const r = await client.query('SELECT pg_advisory_unlock(hashtext($1)) AS ok', [h.key])
        if (r.rows[0].ok !== true) throw new Error('pg_advisory_unlock answered false')
      },
    })),
  },
}

for (const name of ['redlock', 'redlock-everysec']) {
  KINDS[name] = {
    async open() {
      const redis = new Redis({ host: '127.0.0.1', port: REDIS_PORT[name], lazyConnect: true })
      redis.on('error', noop)
      await redis.connect().catch((err) => {
        redis.disconnect()
        throw err
      })
      const redlock = new Redlock([redis]) // defaults as shipped
      redlock.on('clientError', noop) // its errors also reject the lock's promise
      return {
        redis,
        async acquire(key, { ttl = TTL } = {}) {
          try {
            return await redlock.lock(key, ttl * 1000)
          } catch (err) {
            if (err instanceof Redlock.LockError) return null
            throw err
          }
        },
        release: (lock) => lock.unlock(),
        close: () => redis.quit(),
      }
    },
  }
}

async function meta(c) {
  const v = (name) => require(`${name}/package.json`).version
  if (c === 'dlock-node' || c === 'dlock-sql' || c === 'advisory') {
    const client = new pg.Client(PG)
    await client.connect()
    try {
      const s = (await client.query("SELECT current_setting('server_version') AS v, " +
        "current_setting('synchronous_commit') AS sc, current_setting('fsync') AS f, " +
        "(SELECT extversion FROM pg_extension WHERE extname = 'dlock') AS e")).rows[0]
      const server = `PostgreSQL ${s.v} (fsync ${s.f}, synchronous_commit ${s.sc}), pg ${v('pg')}`
      if (c === 'advisory') return `${server}; pg_advisory_lock(hashtext(key)), session locks, no ttl`
      if (c === 'dlock-sql') return `dlock ${s.e}, ${server}; dlock_acquire/dlock_release, ttl ${TTL} s, wait ${WAIT} s`
      return `pg-dlock ${dlock.version}, dlock ${s.e}, ${server}; acquire(pool, key, {ttl: ${TTL}, wait: ${WAIT}}) + lease.release(), on the lease's own connection, kept between leases`
    } finally {
      await client.end()
    }
  }
  if (c === 'etcd') {
    const client = new Etcd3({ hosts: ETCD })
    try {
      const st = await client.maintenance.status()
      return `etcd ${st.version} (default fsync), etcd3 ${v('etcd3')}; lock(key).ttl(${TTL}).acquire() + release(); no waiting in etcd3's Lock: a refused acquire waits for the key's deletion (a watch) and tries again, up to ${WAIT} s`
    } finally {
      client.close()
    }
  }
  const redis = new Redis({ host: '127.0.0.1', port: REDIS_PORT[c], lazyConnect: true })
  redis.on('error', noop)
  try {
    await redis.connect()
    const info = await redis.info('server')
    const ver = /redis_version:(\S+)/.exec(info)[1]
    const aof = (await redis.config('GET', 'appendonly'))[1]
    const fs = (await redis.config('GET', 'appendfsync'))[1]
    return `Redis ${ver} (appendonly ${aof}, appendfsync ${fs}${fs === 'always' ? '' : ': not durable'}), ` +
      `redlock ${v('redlock')} + ioredis ${v('ioredis')}, one instance, defaults (retryCount 10, retryDelay 200 ms, retryJitter 100 ms); lock(resource, ${TTL * 1000}) + unlock()`
  } finally {
    redis.disconnect()
  }
}

async function openAll(c, n) {
  const sessions = []
  try {
    for (let i = 0; i < n; i++) sessions.push(await KINDS[c].open())
  } catch (err) {
    await closeAll(sessions)
    throw err
  }
  return sessions
}

async function closeAll(sessions) {
  await Promise.all(sessions.map((s) => Promise.resolve().then(() => s.close()).catch(noop)))
}

// ---------------------------------------------------------------- sections

// N clients loop acquire + release for `duration` s: keyOf(i) gives each
// pair's key.  Returns {rate, gaveUp}.
async function loops(c, n, duration, keyOf) {
  const sessions = await openAll(c, n)
  try {
    let pairs = 0
    let gaveUp = 0
    const each = sessions.map(() => 0)
    const t0 = now()
    const deadline = t0 + BigInt(Math.round(duration * 1e9))
    await Promise.all(sessions.map(async (s, i) => {
      while (now() < deadline) {
        const h = await s.acquire(keyOf(i))
        if (h === null) {
          gaveUp++
          continue
        }
        await s.release(h)
        if (now() <= deadline) {
          pairs++
          each[i]++
        }
      }
    }))
    return { rate: pairs / duration, gaveUp, top: pairs ? Math.max(...each) / pairs : 0 }
  } finally {
    await closeAll(sessions)
  }
}

async function pairs(c, n, duration) {
  const r = await loops(c, n, duration, () => `peers-pair-${rand()}`)
  if (r.gaveUp) throw new Error(`${r.gaveUp} uncontended acquires were not granted`)
  return r
}

async function hot(c, n, duration, round) {
  const key = `peers-hot-${c}-${round}-${n}-${rand()}`
  return loops(c, n, duration, () => key)
}

// until the server shows a waiter queued for key (dlock, advisory); for
// etcd and redlock the waiter's tries are in flight: nothing to see
async function queued(c, mon, key) {
  let text
  if (c === 'dlock-node' || c === 'dlock-sql') text = 'SELECT count(*)::int AS n FROM dlock_waiters WHERE key = $1'
  else if (c === 'advisory') {
    text = "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted " +
      'AND objid = (hashtext($1)::bigint & 4294967295)::oid'
  } else return
  const end = now() + 10_000_000_000n
  while ((await mon.query(text, [key])).rows[0].n === 0) {
    if (now() > end) throw new Error('the waiter never showed up queued on the server')
    await sleep(2)
  }
}

async function handoff(c, trials, round, mon) {
  const [a, b] = await openAll(c, 2)
  try {
    const samples = []
    for (let i = 0; i < trials; i++) {
      const key = `peers-handoff-${c}-${round}-${i}-${rand()}`
      const held = await a.acquire(key)
      if (held === null) throw new Error('the holder did not get a free key')
      let granted
      const waiter = b.acquire(key).then((h) => {
        granted = now()
        return h
      })
      waiter.catch(noop)
      await queued(c, mon, key)
      await sleep(20 + Math.random() * 300)
      if (granted !== undefined) throw new Error('the waiter was granted a held key')
      await a.release(held)
      const released = now()
      const h = await waiter
      if (h === null) throw new Error('the waiter gave up (redlock: its retries ran out?)')
      samples.push(ms(released, granted))
      await b.release(h)
    }
    return samples
  } finally {
    await closeAll([a, b])
  }
}

function pct(sorted, q) {
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]
}

const r3 = (x) => Math.round(x * 1000) / 1000

// ---------------------------------------------------------------- safety

// Blocks the event loop for t ms, as a GC pause or a stopped VM would:
// no timer, renewal or keep-alive runs meanwhile.
function freeze(t) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, t)
}

const RESOURCE = 'peers_lock_resource'

// the taker (another process): keeps acquiring key until it has it, then
// tells the parent when (Date.now()) and holds until told to release
async function taker(c, key) {
  const s = await KINDS[c].open()
  process.send({ ready: true })
  const end = Date.now() + 30_000
  let h = null
  while (h === null && Date.now() < end) h = await s.acquire(key, { ttl: SAFETY_TTL, wait: WAIT })
  process.send(h === null ? { acquired: false } : { acquired: true, at: Date.now(), token: h.token })
  await new Promise((resolve) => process.once('message', resolve))
  if (h !== null) await s.release(h).catch(noop)
  await s.close()
  process.exit(0)
}

function child(c, key) {
  const proc = fork(__filename, ['--taker', c, key], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] })
  const messages = []
  const waiting = []
  proc.on('message', (m) => {
    const w = waiting.shift()
    if (w) w(m)
    else messages.push(m)
  })
  return {
    proc,
    has: () => messages.length > 0,
    next: (t, what) => limit(new Promise((resolve) => {
      if (messages.length) resolve(messages.shift())
      else waiting.push(resolve)
    }), t, what),
  }
}

async function safety(c, mon) {
  await mon.query(`CREATE TABLE IF NOT EXISTS ${RESOURCE} (id int PRIMARY KEY, writer text, token text, writes int NOT NULL DEFAULT 0)`)
  await mon.query(`INSERT INTO ${RESOURCE} (id) VALUES (1) ON CONFLICT DO NOTHING`)
  const key = `peers-safety-${c}-${rand()}`
  const a = await KINDS[c].open()
  let b
  try {
    const held = await a.acquire(key, { ttl: SAFETY_TTL, wait: 0 })
    if (held === null) throw new Error('A did not get a free key')
    let revA
    if (c === 'etcd') revA = (await a.client.get(key).exec()).kvs[0].create_revision
    b = child(c, key)
    await b.next(30_000, 'the taker did not start')
    await sleep(200) // the taker's first try is in flight
    const pause = (SAFETY_TTL + 2) * 1000
    log(`safety ${c}: A holds ${key}, pauses ${pause / 1000} s`)
    freeze(pause)
    // A resumes: its write goes out before anything else of its runs
    const writeAt = Date.now()
    const plain = `UPDATE ${RESOURCE} SET writer = 'A', token = $1, writes = writes + 1 WHERE id = 1`
    let detail
    let ok
    let took
    if (c === 'dlock-sql' || c === 'dlock-node') {
      const fenced = `UPDATE ${RESOURCE} SET writer = 'A', token = $4, writes = writes + 1 WHERE id = 1 AND dlock_validate($1, $2, $3)`
      let client
      let local = null
      if (c === 'dlock-node') {
        // as the client's README shows: lease.query(pool, text) runs text behind dlock_validate
        const q = held.query(a.pool, plain, [String(held.token)])
        try {
          const r = await q
          local = `lease.query wrote ${r.rowCount} row(s)`
        } catch (err) {
          local = `lease.query refused (${err.constructor.name}: ${err.message})`
          if (!(err instanceof dlock.LeaseLostError)) throw err
        }
        client = new pg.Client(PG)
        await client.connect()
      } else client = a.client
      // the fence on the server, with A's old token: dlock_validate in the write's transaction
      await client.query('BEGIN')
      const r = await client.query(fenced, [key, held.holder || a.holder, held.token, String(held.token)])
      await client.query('COMMIT')
      if (c === 'dlock-node') await client.end()
      took = await b.next(30_000, 'the taker never reported')
      ok = r.rowCount === 0 && (local === null || !local.startsWith('lease.query wrote'))
      detail = `B took the key over with token ${took.token} during A's ${pause / 1000} s pause (ttl ${SAFETY_TTL} s); ` +
        (local ? `${local}; ` : '') +
        `UPDATE ... WHERE dlock_validate(key, holder, ${held.token}) in A's transaction wrote ${r.rowCount} row(s)`
    } else if (c === 'etcd') {
      const r = await mon.query(plain, ['etcd-lease'])
      const txn = await a.client.if(key, 'Create', '==', revA).then(a.client.put(`${key}-resource`).value('A')).commit()
      took = await b.next(30_000, 'the taker never reported')
      const revB = took.acquired ? (await a.client.get(key).exec()).kvs.map((kv) => kv.create_revision)[0] : null
      ok = r.rowCount === 0
      detail = `B took the key over during A's ${pause / 1000} s pause (lease ttl ${SAFETY_TTL} s; lock key now created at revision ${revB}); ` +
        `A's plain UPDATE of the PostgreSQL row wrote ${r.rowCount} row(s): etcd3's Lock gives no token; ` +
        `etcd's own guard, a Txn if create_revision(key) == ${revA} (A's) then put, ${txn.succeeded ? 'succeeded' : 'was refused'}: ` +
        'it fences writes into etcd only; the revision as a token helps a resource that checks it'
    } else if (c === 'redlock' || c === 'redlock-everysec') {
      const r = await mon.query(plain, [held.value])
      took = await b.next(30_000, 'the taker never reported')
      ok = r.rowCount === 0
      detail = `B took the key over during A's ${pause / 1000} s pause (ttl ${SAFETY_TTL * 1000} ms); ` +
        `A's write wrote ${r.rowCount} row(s): redlock gives no fencing token (its value is random, nothing can order it)`
    } else {
      // advisory: the session lives through the pause, so nobody can take over
      const r = await mon.query(plain, ['advisory'])
      await sleep(300)
      const early = b.has()
      await a.release(held)
      took = await b.next(30_000, 'the taker never reported')
      ok = !early
      detail = `no ttl: B ${early ? 'got' : 'could not get'} the lock during A's ${pause / 1000} s pause while A's session lived, ` +
        `so A's write (${r.rowCount} row) was not stale; B got it after A's unlock; no token either, so a holder whose ` +
        'session died (and lock with it) writing on another connection would not be refused'
    }
    if (!took.acquired) throw new Error('the taker never got the key: no takeover to probe')
    if (c !== 'advisory' && !(took.at <= writeAt)) throw new Error('the taker got the key only after A wrote: no takeover before the write')
    return { ok, detail }
  } finally {
    if (b) {
      b.proc.send('release')
      await limit(new Promise((resolve) => b.proc.once('exit', resolve)), 30_000, 'the taker did not exit').catch((e) => {
        log(e.message)
        b.proc.kill()
      })
    }
    await a.close().catch(noop)
  }
}

// ---------------------------------------------------------------- main

async function main() {
  const contenders = list('CONTENDERS', ALL, 'contenders')
  const sections = list('SECTIONS', ALL_SECTIONS, 'sections')
  const failed = new Map()
  const alive = () => contenders.filter((c) => !failed.has(c))
  const runLimit = (d) => Math.max(10 * d * 1000, 30_000)
  const fail = (c, what, err) => {
    log(`${c} failed in ${what}: ${err && err.stack ? err.stack : err}`)
    failed.set(c, `${what}: ${err && err.message}`)
  }
  const mon = new pg.Client(PG)
  mon.on('error', noop)
  await mon.connect()

  for (const c of contenders) {
    try {
      out({ section: 'meta', contender: c, detail: await limit(meta(c), 30_000, 'meta') })
    } catch (err) {
      fail(c, 'meta', err)
    }
  }

  // a section: cells (params), run(c, cell, round) -> the JSON fields;
  // one warm-up run per contender first (unrecorded), then rounds of
  // cells of contenders, interleaved
  async function section(name, cells, run, warm) {
    for (const c of alive()) {
      try {
        log(`${name} ${c} warm-up`)
        await warm(c)
      } catch (err) {
        fail(c, `${name} warm-up`, err)
      }
    }
    for (let round = 1; round <= ROUNDS; round++) {
      for (const cell of cells) {
        for (const c of alive()) {
          try {
            const fields = await run(c, cell, round)
            out({ section: name, contender: c, round, ...cell, ...fields })
          } catch (err) {
            fail(c, `${name} round ${round} ${JSON.stringify(cell)}`, err)
          }
        }
      }
    }
  }

  if (sections.includes('pairs')) {
    await section('pairs', [1, 4, 16].map((n) => ({ clients: n })),
      async (c, { clients }) => {
        const r = await limit(pairs(c, clients, DURATION), runLimit(DURATION), `pairs ${c}`)
        log(`pairs ${c} ${clients} clients: ${r.rate.toFixed(1)}/s`)
        return { value: r3(r.rate) }
      },
      (c) => limit(pairs(c, 1, DURATION), runLimit(DURATION), `pairs ${c} warm-up`))
  }

  if (sections.includes('hot')) {
    await section('hot', [4, 16].map((n) => ({ clients: n })),
      async (c, { clients }, round) => {
        const r = await limit(hot(c, clients, DURATION, round), runLimit(DURATION) + WAIT * 1000, `hot ${c}`)
        log(`hot ${c} ${clients} clients: ${r.rate.toFixed(1)}/s, the busiest client made ${(100 * r.top).toFixed(0)}% of them` +
          (r.gaveUp ? `, ${r.gaveUp} acquires gave up` : ''))
        return { value: r3(r.rate) }
      },
      (c) => limit(hot(c, 4, DURATION, 0), runLimit(DURATION) + WAIT * 1000, `hot ${c} warm-up`))
  }

  if (sections.includes('handoff')) {
    const each = (n) => Math.max(10 * n * 0.5 * 1000, 30_000) // at most ~0.5 s a trial, 10x
    await section('handoff', [{}],
      async (c, cell, round) => {
        const s = (await limit(handoff(c, TRIALS, round, mon), each(TRIALS), `handoff ${c}`)).sort((x, y) => x - y)
        const f = { p50: r3(pct(s, 0.5)), p99: r3(pct(s, 0.99)), n: s.length }
        log(`handoff ${c}: p50 ${f.p50} ms, p99 ${f.p99} ms, min ${r3(s[0])}, max ${r3(s[s.length - 1])}`)
        return f
      },
      (c) => limit(handoff(c, Math.max(5, Math.round(TRIALS / 10)), 0, mon), each(TRIALS), `handoff ${c} warm-up`))
  }

  if (sections.includes('safety')) {
    for (const c of alive()) {
      try {
        const r = await limit(safety(c, mon), 120_000, `safety ${c}`)
        out({ section: 'lock_safety', contender: c, ok: r.ok, detail: r.detail })
      } catch (err) {
        fail(c, 'safety', err)
      }
    }
  }

  await mon.end().catch(noop)
  if (failed.size) {
    for (const [c, why] of failed) log(`FAILED ${c}: ${why}`)
    return 1
  }
  return 0
}

if (process.argv[2] === '--taker') {
  taker(process.argv[3], process.argv[4]).catch((err) => {
    process.stderr.write(`locks taker ${process.argv[3]}: ${err.stack}\n`)
    process.exit(1)
  })
} else {
  main().then((code) => process.exit(code), (err) => {
    log(err.stack)
    process.exit(1)
  })
}
