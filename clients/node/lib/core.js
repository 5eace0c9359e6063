'use strict'
// lib/core.js - what leases and claims share: errors, bounded calls over
// the caller's pools, and the Keeper that renews every ttl/3 and declares
// the loss when the server says no, or when ttl has passed (on the
// monotonic clock) since the sending of the last renewal the server
// confirmed: the rule of `dlock run`.  No call outlasts that moment.

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

// No answer before the deadline (the connection was dropped).
class TimeoutError extends DlockError {
  constructor(message = 'no answer in time') {
    super(message)
    this.name = 'TimeoutError'
    this.code = 'DLOCK_TIMEOUT'
  }
}

// SQLSTATEs (and classes) after which a call is worth repeating on a new
// connection: the server is going away or not ready, or this one is a
// standby (25006); the next pool is tried.
const RETRY_STATES = new Set(['25006', '40001', '40P01'])
const RETRY_CLASSES = new Set(['08', '57', '53'])

function retryable(err) {
  if (!err) return false
  if (err instanceof TimeoutError) return true
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

  async call(text, values, deadline, { signal, cancel = false } = {}) {
    const left = deadline - now()
    if (left <= 0) throw new TimeoutError()
    const pool = this.pools[this.i]
    let client
    try {
      client = await bounded(pool.connect(), left, signal, (late) => late.release())
    } catch (err) {
      this._next(err)
      throw err
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
      throw err
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
  TimeoutError,
  retryable,
  seconds,
  interval,
  defaultHolder,
  sleep,
  Caller,
  Keeper,
}
