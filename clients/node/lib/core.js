'use strict'
// lib/core.js - what leases and claims share: errors, bounded calls over
// the caller's pools or over connections of the client's own
// (OwnConnection: made with a pool's settings, never taken from it, so that
// the application's queries cannot hold a renewal up), the registry of the
// (key, holder) pairs this process holds (one lease object per pair), and
// the Keeper that renews every ttl/3 and declares the loss when the server
// says no, or when ttl has passed (on the monotonic clock) since the
// sending of the last renewal the server confirmed: the rule of `dlock
// run`.  No call outlasts that moment.

const os = require('os')
const crypto = require('crypto')
const { performance } = require('perf_hooks')
const pg = require('pg')

const now = () => performance.now()

// setTimeout takes at most 2^31 - 1 ms (some 24 days); longer waits are cut
// there (a timer that fires early only makes the caller look again)
const MAX_TIMER = 2147483647
const timerMs = (ms) => Math.min(Math.max(0, ms), MAX_TIMER)

class DlockError extends Error {
  constructor(message, options) {
    super(message, options)
    this.name = 'DlockError'
  }
}

// The key was not acquired within `wait`.
class NotAcquiredError extends DlockError {
  constructor(message) {
    super(message)
    this.name = 'NotAcquiredError'
    this.code = 'DLOCK_NOT_ACQUIRED'
  }
}

// The lease (or a batch's claims) is lost: stop working on what it guards.
class LeaseLostError extends DlockError {
  constructor(message) {
    super(message)
    this.name = 'LeaseLostError'
    this.code = 'DLOCK_LEASE_LOST'
  }
}

// A lease of this process (acquiring, held, or lost but not yet released)
// already has this key with this holder: the server would give a second
// acquire by the same holder the same token, and two blocks would each
// believe they hold the key alone.
class HolderInUseError extends DlockError {
  constructor(message) {
    super(message)
    this.name = 'HolderInUseError'
    this.code = 'DLOCK_HOLDER_IN_USE'
  }
}

// A dlock call the server refused (sqlstate: its SQLSTATE, also in code,
// as pg has it), or that no server answered (sqlstate null; code the
// driver's, ECONNREFUSED say).  cause: the driver's error.
class DatabaseError extends DlockError {
  constructor(message, cause) {
    super(message, cause === undefined ? undefined : { cause })
    this.name = 'DatabaseError'
    const code = cause && typeof cause.code === 'string' ? cause.code : ''
    this.sqlstate = /^[0-9A-Z]{5}$/.test(code) ? code : null
    this.code = code || 'DLOCK_DATABASE'
  }
}

// No answer before the deadline (the connection was dropped): the outcome
// of the call is unknown.
class TimeoutError extends DatabaseError {
  constructor(message = 'no answer in time') {
    super(message)
    this.name = 'TimeoutError'
    this.code = 'DLOCK_TIMEOUT'
  }
}

// err as the client's error: a driver's (or the network's) becomes a
// DatabaseError; the client's own, and argument errors, stay as they are
function databaseError(err) {
  if (!err || err instanceof DlockError || err instanceof TypeError || err instanceof RangeError) return err
  return new DatabaseError(err.message || String(err), err)
}

// SQLSTATEs (and classes) after which a call is worth repeating on a new
// connection: the server is going away or not ready, or this one is a
// standby (25006); the next pool is tried.
const RETRY_STATES = new Set(['25006', '40001', '40P01'])
const RETRY_CLASSES = new Set(['08', '57', '53'])

function retryable(err) {
  if (!err) return false
  if (err instanceof TimeoutError) return true
  if (err instanceof DatabaseError) return retryable(err.cause)
  const code = typeof err.code === 'string' ? err.code : ''
  if (/^[0-9A-Z]{5}$/.test(code)) return RETRY_STATES.has(code) || RETRY_CLASSES.has(code.slice(0, 2))
  // no SQLSTATE: a connection that failed or ended (ECONNREFUSED, ...)
  return !(err instanceof DlockError) && !(err instanceof TypeError) && !(err instanceof RangeError)
}

// seconds (a number) from the options, checked
function seconds(value, name, positive = true) {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || (positive && value === 0)) {
    throw new RangeError(`${name} must be a number of seconds ${positive ? 'more than' : 'at least'} 0`)
  }
  return value
}

function interval(sec) {
  return `${Math.round(sec * 1e6)} microseconds`
}

function defaultHolder() {
  return `${os.hostname()}:${process.pid}:${crypto.randomBytes(4).toString('hex')}`
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    if (signal && signal.aborted) return resolve()
    const done = () => {
      clearTimeout(t)
      if (signal) signal.removeEventListener('abort', done)
      resolve()
    }
    const t = setTimeout(done, timerMs(ms))
    if (signal) signal.addEventListener('abort', done, { once: true })
  })
}

// promise raced against ms and signal; onLate(value) gets a value that
// arrives after we gave up on it (a client to give back)
function bounded(promise, ms, signal, onLate) {
  return new Promise((resolve, reject) => {
    let settled = false
    const finish = (fn, v) => {
      if (settled) return false
      settled = true
      clearTimeout(t)
      if (signal) signal.removeEventListener('abort', onAbort)
      fn(v)
      return true
    }
    const onAbort = () => finish(reject, signal.reason !== undefined ? signal.reason : new DlockError('aborted'))
    const t = ms > MAX_TIMER ? null : setTimeout(() => finish(reject, new TimeoutError()), Math.max(0, ms))
    if (signal) {
      if (signal.aborted) return onAbort()
      signal.addEventListener('abort', onAbort, { once: true })
    }
    promise.then(
      (v) => { if (!finish(resolve, v) && onLate) onLate(v) },
      (e) => finish(reject, e)
    )
  })
}

// a cancel request for the statement running on client (best effort; the
// client is dropped anyway)
function sendCancel(client) {
  try {
    if (!client || !client.processID) return
    const con = new pg.Connection()
    const host = client.host || 'localhost'
    const timer = setTimeout(() => con.stream.destroy(), 5000)
    timer.unref()
    con.on('error', () => {})
    con.on('connect', () => {
      con.cancel(client.processID, client.secretKey)
      con.stream.on('close', () => clearTimeout(timer))
    })
    if (host.startsWith('/')) con.connect(`${host}/.s.PGSQL.${client.port}`)
    else con.connect(client.port, host)
  } catch (e) {
    // best effort
  }
}

const noop = () => {}

// The (key, holder) pairs of this process's leases, from the start of their
// acquire to the end of their release: one lease object per pair.  Shared
// by every copy of this module loaded in the process.
const HOLDING_SLOT = Symbol.for('pg-dlock.holding')
const HOLDING = globalThis[HOLDING_SLOT] || (globalThis[HOLDING_SLOT] = new Map())

// Takes every (key, holder) pair of keys for one lease object, or throws
// HolderInUseError (taking none) if a lease of this process has one of
// them; returns the function that gives them back.
function reserve(keys, holder, label) {
  const pairs = keys.map((k) => JSON.stringify([k, holder]))
  const i = pairs.findIndex((p) => HOLDING.has(p))
  if (i >= 0) {
    throw new HolderInUseError(`${label}: holder ${JSON.stringify(holder)} already has key ` +
      `${JSON.stringify(keys[i])} in a lease of this process (acquiring, held or not yet released); ` +
      'the server would give both the same token: use another holder, or wait for that release')
  }
  const mine = {}
  for (const p of pairs) HOLDING.set(p, mine)
  return () => {
    for (const p of pairs) if (HOLDING.get(p) === mine) HOLDING.delete(p)
  }
}

// Connections of leases and claim loops that ended, kept for the next of
// the same pool (pool -> clients, the newest last): a lease costs two
// statements instead of a new server session (a TCP connect, the startup
// and a backend fork: tens of ms, more than the lease's two commits).
// Kept: at most the pool's max (10), each closed after the pool's
// idleTimeoutMillis (10 s; 0: never) unused; a kept client never keeps the
// process alive (unref), and one that ends or fails (a server restart) is
// forgotten at once; pool.end() ends them.  Only a client idle and without
// an error is kept.
const KEPT = new WeakMap()

function keep(pool, client) {
  const kept = KEPT.get(pool) || []
  const o = pool.options
  if (pool.ending || pool.ended || kept.length >= (o.max || 10)) {
    client.end().catch(noop)
    return
  }
  if (!KEPT.has(pool)) {
    KEPT.set(pool, kept)
    // pool.end() ends the kept clients too, as it ends its own idle ones
    const end = pool.end
    pool.end = function (...args) {
      for (const c of kept.splice(0)) {
        clearTimeout(c._dlockIdle)
        c.end().catch(noop)
      }
      return end.apply(this, args)
    }
  }
  const forget = () => {
    const i = kept.indexOf(client)
    if (i >= 0) kept.splice(i, 1)
    clearTimeout(client._dlockIdle)
    client.removeListener('end', forget)
    client.removeListener('error', forget)
  }
  client._dlockForget = forget
  client.once('end', forget)
  client.once('error', forget)
  const idle = o.idleTimeoutMillis === undefined ? 10000 : o.idleTimeoutMillis
  if (idle > 0) {
    client._dlockIdle = setTimeout(() => {
      forget()
      client.end().catch(noop)
    }, idle)
    client._dlockIdle.unref()
  }
  if (typeof client.unref === 'function') client.unref()
  kept.push(client)
}

function takeKept(pool) {
  const kept = KEPT.get(pool)
  const client = kept && kept[kept.length - 1]
  if (!client) return null
  client._dlockForget()
  if (typeof client.ref === 'function') client.ref()
  return client
}

// A connection of the client's own, made with a pool's settings (as the
// pool makes its clients: new pool.Client(pool.options); not its 'connect'
// listeners) but never taken from the pool nor given to it: what a lease
// acquires, renews and releases on, and what a claim loop renews on, so
// that the application's queries holding every client of its pool never
// hold a renewal up.  It offers a pool's connect() to Caller: the client
// given back without an error is kept for the next call; given back with
// one (or timed out), it is closed, and the next call makes a new one.
// Closed while no call has it and none failed, the client is kept for the
// next OwnConnection of the pool (keep, above), else ended.
class OwnConnection {
  constructor(pool) {
    if (!pool || typeof pool.Client !== 'function' || !pool.options || typeof pool.options !== 'object') {
      throw new TypeError('pool must be a pg.Pool (or an array of them, one per host)')
    }
    this._pool = pool
    this._client = null // the current client
    this._ready = null // the promise of it, connected
    this._closed = false
  }

  connect() {
    if (this._closed) return Promise.reject(new DlockError('the connection of the lease is closed'))
    if (!this._ready) {
      const kept = takeKept(this._pool)
      const client = kept || new this._pool.Client(this._pool.options)
      if (!kept) client.on('error', noop) // reported through the query; the client is dropped
      client._dlockListening = true
      client._dlockBusy = 0 // calls that have it (connect() to release())
      client.release = (err) => {
        client._dlockBusy--
        if (err) this._drop(client)
      }
      this._client = client
      this._ready = kept ? Promise.resolve(client) : client.connect().then(() => client, (err) => {
        this._drop(client)
        throw err
      })
    }
    return this._ready.then((client) => {
      client._dlockBusy++
      return client
    })
  }

  _drop(client) {
    if (this._client === client) {
      this._client = null
      this._ready = null
    }
    client._dlockDropped = true
    client.end().catch(noop)
  }

  // closes the connection (a hung statement on it too); forGood: no other
  // is made after.  A client no call has and none failed on is kept for
  // the pool's next lease.
  close(forGood = false) {
    if (forGood) this._closed = true
    const client = this._client
    if (!client) return
    this._client = null
    const ready = this._ready
    this._ready = null
    ready.then(() => {
      if (client._dlockBusy === 0 && !client._dlockDropped) keep(this._pool, client)
      else client.end().catch(noop)
    }, noop)
  }
}

// Calls over the caller's pools (one pool, or one per host to try in
// order): each call checks a client out, runs one statement, gives the
// client back; a call that fails for the connection's sake drops its
// client and the next call goes to the next pool.
class Caller {
  constructor(pools) {
    const list = Array.isArray(pools) ? pools : [pools]
    if (list.length === 0 || list.some((p) => !p || typeof p.connect !== 'function')) {
      throw new TypeError('pool must be a pg.Pool (or an array of them, one per host)')
    }
    this.pools = list
    this.i = 0
  }

  // calls over connections of the client's own, one per pool of pools
  // (made with its settings, never taken from it)
  static own(pools) {
    const list = Array.isArray(pools) ? pools : [pools]
    if (list.length === 0) throw new TypeError('pool must be a pg.Pool (or an array of them, one per host)')
    return new Caller(list.map((p) => new OwnConnection(p)))
  }

  // closes the connections of the client's own (Caller.own); forGood: no
  // call is made after
  close(forGood = false) {
    for (const p of this.pools) if (p instanceof OwnConnection) p.close(forGood)
  }

  async call(text, values, deadline, { signal, cancel = false } = {}) {
    const left = deadline - now()
    if (left <= 0) throw new TimeoutError()
    const pool = this.pools[this.i]
    let client
    try {
      client = await bounded(pool.connect(), left, signal, (late) => late.release())
    } catch (err) {
      this._next(err)
      throw signal && signal.aborted ? err : databaseError(err)
    }
    if (!client._dlockListening) {
      client.on('error', noop) // reported through the query; the pool drops it
      client._dlockListening = true
    }
    try {
      const res = await bounded(client.query(text, values), deadline - now(), signal)
      client.release()
      return res
    } catch (err) {
      const broken = err instanceof TimeoutError || !err || !err.code || retryable(err) || (signal && signal.aborted)
      if (broken && cancel) sendCancel(client)
      client.release(broken ? err || new Error('dropped') : undefined)
      this._next(err)
      throw signal && signal.aborted ? err : databaseError(err)
    }
  }

  async value(text, values, deadline, opts) {
    const res = await this.call(text, values, deadline, opts)
    return res.rows.length ? res.rows[0][res.fields[0].name] : null
  }

  _next(err) {
    if (this.pools.length > 1 && retryable(err)) this.i = (this.i + 1) % this.pools.length
  }

  // a call repeated (on the next pool) while the failure is the connection's
  async retrying(text, values, timeoutMs, opts = {}) {
    const deadline = now() + timeoutMs
    for (;;) {
      try {
        return await this.call(text, values, deadline, opts)
      } catch (err) {
        if (!retryable(err) || now() + 200 >= deadline || (opts.signal && opts.signal.aborted)) throw err
        await sleep(200, opts.signal)
      }
    }
  }
}

// Renews every ttl/3 with renew(deadline, signal) -> boolean until
// stopped; onLost(LeaseLostError) once when the server says no, or when
// ttl has passed since the sending of the last confirmed renewal.
class Keeper {
  constructor(ttlMs, sent, renew, onLost) {
    this.ttlMs = ttlMs
    this.period = ttlMs / 3
    this.confirmed = sent
    this.deadline = sent + ttlMs
    this.lost = null
    this.lostAt = null
    this.lastError = null
    this.renewals = 0
    this._renew = renew
    this._onLost = onLost
    this._stopping = false
    this._ctl = new AbortController()
    this._done = null
  }

  start() {
    this._done = this._loop().catch((e) => this._lose(`renewal failed: ${e && e.message}`))
  }

  async _loop() {
    let nextAt = this.confirmed + this.period
    while (!this._stopping && !this.lost) {
      const t = now()
      if (t >= this.deadline) {
        let why = `no renewal confirmed within the ttl (${this.ttlMs / 1000} s)`
        if (this.lastError) why += `; last error: ${this.lastError.message || this.lastError}`
        this._lose(why)
        return
      }
      const until = Math.min(nextAt, this.deadline)
      if (until > t) {
        await sleep(until - t, this._ctl.signal)
        continue
      }
      const sent = now()
      let ok
      try {
        ok = await this._renew(this.deadline, this._ctl.signal)
      } catch (err) {
        this.lastError = err
        nextAt = Math.min(sent + Math.max(this.period / 5, 200), this.deadline)
        continue
      }
      if (this._stopping || this.lost) return
      if (ok) {
        this.confirmed = sent
        this.deadline = sent + this.ttlMs
        this.renewals++
        this.lastError = null
        nextAt = sent + this.period
      } else {
        this._lose('the server refused the renewal (expired, released or taken over)')
        return
      }
    }
  }

  // declare the loss now (a fence said no): no renewal after this
  declareLost(why) {
    this._lose(why)
    this._ctl.abort()
  }

  _lose(why) {
    if (this.lost || this._stopping) return
    this.lost = new LeaseLostError(why)
    this.lostAt = now()
    try {
      this._onLost(this.lost)
    } catch (e) {
      process.emitWarning(`dlock: the onLost callback threw: ${e && e.message}`)
    }
  }

  // stop renewing, for good; a renewal under way is abandoned
  async stop() {
    this._stopping = true
    this._ctl.abort()
    if (this._done) await this._done
  }
}

module.exports = {
  now,
  DlockError,
  NotAcquiredError,
  LeaseLostError,
  DatabaseError,
  TimeoutError,
  HolderInUseError,
  reserve,
  OwnConnection,
  retryable,
  seconds,
  interval,
  defaultHolder,
  sleep,
  Caller,
  Keeper,
}
