// A usage sample of pg-dlock's types, checked by `tsc -p test/types`
// (scripts/test-clients.sh): what the README shows must type-check against
// index.d.ts, and the misuses marked @ts-expect-error must not.
import { Pool } from 'pg'
import * as dlock from '../..'

const pool = new Pool()

async function leases(signal: AbortSignal): Promise<void> {
  const lease: dlock.Lease = await dlock.acquire(pool, 'nightly-report', { ttl: 30, wait: 10, signal })
  const token: string = lease.token
  const key: string = lease.key
  const res = await lease.query<{ id: number }>(pool, 'UPDATE report SET token = $1 WHERE id = 1 RETURNING id', [token])
  const id: number = res.rows[0].id
  lease.check()
  const left: number = lease.remaining()
  const released: boolean | null = await lease.release()
  void [key, id, left, released]

  const sem = await dlock.acquire([pool, pool], 'exporters', { slots: 3, onLost: (l, err) => { void l.slots; void err.code } })
  const shared = await dlock.acquire(pool, 'catalog', { shared: true })
  void [sem.slots, shared.shared]

  const n: number = await dlock.withLease(pool, 'k', { ttl: 5 }, async (l, s) => { void s.aborted; return l.token.length })
  const m: string = await dlock.withLease(pool, 'k', (l) => l.holder)
  void [n, m]

  const all: dlock.Leases = await dlock.acquireAll(pool, ['a', 'b'], { ttl: 30 })
  const t: Record<string, string> = all.tokens
  await dlock.withLeases(pool, ['a', 'b'], async (ls) => ls.keys.join(','))
  void t

  // @ts-expect-error a token is a string (a bigint's digits), not a number
  const wrong: number = lease.token
  // @ts-expect-error slots is a number
  await dlock.acquire(pool, 'k', { slots: '3' })
  // @ts-expect-error a key is a string
  await dlock.acquire(pool, 42)
  void wrong
}

interface Sms { id: number; body: string }

async function claims(signal: AbortSignal): Promise<void> {
  for await (const batch of dlock.claims<Sms>(pool, 'sms', 'sender-3', {
    n: 10, ttl: 60, filter: 'status = 0', orderBy: 'created_at, id', wait: 30,
    groupBy: 'tenant', perGroup: 2, fair: true, backoff: 1, backoffMax: 60, signal,
  })) {
    const body: string = batch.rows[0].body
    const client = await pool.connect()
    const done: any[] = await batch.complete(batch.keys, client)
    const back: number = await batch.unclaim(null, client)
    const failed: number = await batch.fail(undefined, null, 5)
    client.release()
    void [body, done, back, failed]
  }
  await dlock.work<Sms>(pool, 'sms', 'sender-3', { onError: (err, b) => { void err; void b.rows } },
    async (batch) => { void batch.rows[0].id })
  // @ts-expect-error orderBy is camelCase
  dlock.claims(pool, 'sms', 'h', { order_by: 'id' })
}

function errors(err: unknown): string {
  if (err instanceof dlock.NotAcquiredError) return err.code
  if (err instanceof dlock.LeaseLostError) return err.code
  if (err instanceof dlock.TimeoutError) return err.code
  if (err instanceof dlock.DatabaseError) return err.sqlstate ?? err.code
  if (err instanceof dlock.HolderInUseError) return err.code
  if (err instanceof dlock.DlockError) return err.message
  return dlock.version
}

void [leases, claims, errors]
