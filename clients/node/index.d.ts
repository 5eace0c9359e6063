// Types of pg-dlock (dlock from Node.js).
import type { Pool, PoolClient, Client, QueryResult } from 'pg'

/**
 * A pg.Pool, or one per host, tried in order.  Leases (acquire, renewal,
 * release) and claim loops' renewals run on connections of their own, made
 * with each pool's settings (new pool.Client(pool.options)), never taken
 * from the pool; claims, completions and lease.query use the pool.
 */
export type Pools = Pool | Pool[]

export interface LeaseOptions<L = Lease> {
  /** seconds; default 30 */
  ttl?: number
  /** seconds to wait for the key; default 0 */
  wait?: number
  /**
   * default HOST:PID:RANDOM, unique to this lease.  One lease object per key
   * and holder in the process: a second one rejects with HolderInUseError
   * until the first is released.
   */
  holder?: string
  /** cancels a waiting acquire; aborts the lease's signal later on */
  signal?: AbortSignal
  /** called once when the lease is lost */
  onLost?: (lease: L, err: LeaseLostError) => void
}

export interface AcquireOptions extends LeaseOptions<Lease> {
  /** one of `slots` places of a counting semaphore (1-1000; every holder of the key names the same) */
  slots?: number
  /** a shared lease: any number of shared holders, or the one holder of the lease */
  shared?: boolean
}

/** What Lease and Leases share. */
export interface Held {
  readonly holder: string
  readonly ttl: number
  /** aborted on loss (reason: LeaseLostError), on the caller's abort, and after the release */
  readonly signal: AbortSignal
  readonly lost: boolean
  readonly lostReason: string | null
  /** performance.now() ms when the lease lapses unless renewed */
  readonly deadline: number
  released: boolean | null
  remaining(): number
  check(): void
  /** runs text fenced by the token(s): dlock_validate (of every key), then text, in one transaction */
  query<R extends Record<string, any> = any>(target: Pool | PoolClient | Client, text: string, values?: any[]): Promise<QueryResult<R>>
  release(): Promise<boolean | null>
}

export interface Lease extends Held {}
export declare class Lease {
  readonly key: string
  /** the fencing token (bigint as a string) */
  readonly token: string
  /** the semaphore's slots, or null */
  readonly slots: number | null
  readonly shared: boolean
}

/** Several keys, all or none: lost as soon as any of them is. */
export interface Leases extends Held {}
export declare class Leases {
  /** each key once, in the order given */
  readonly keys: string[]
  /** key -> fencing token (bigint as a string) */
  readonly tokens: Record<string, string>
}

export declare function acquire(pool: Pools, key: string, options?: AcquireOptions): Promise<Lease>

export declare function withLease<T>(pool: Pools, key: string, options: AcquireOptions,
  fn: (lease: Lease, signal: AbortSignal) => Promise<T> | T): Promise<T>
export declare function withLease<T>(pool: Pools, key: string,
  fn: (lease: Lease, signal: AbortSignal) => Promise<T> | T): Promise<T>

export declare function acquireAll(pool: Pools, keys: string[], options?: LeaseOptions<Leases>): Promise<Leases>

export declare function withLeases<T>(pool: Pools, keys: string[], options: LeaseOptions<Leases>,
  fn: (leases: Leases, signal: AbortSignal) => Promise<T> | T): Promise<T>
export declare function withLeases<T>(pool: Pools, keys: string[],
  fn: (leases: Leases, signal: AbortSignal) => Promise<T> | T): Promise<T>

export interface ClaimOptions {
  /** rows per batch, 1-1000; default 10 */
  n?: number
  /** seconds; default 30 */
  ttl?: number
  filter?: string | null
  orderBy?: string | null
  maxAttempts?: number | null
  /** seconds a turn waits in the server for a row when none is to be had
   *  (dlock_claim's wait, in calls of at most 10 s; woken when an insert
   *  commits: dlock_claim_wakeup); default 0: poll instead */
  wait?: number
  /** seconds between claims when no row is to be had (without wait); default 1 */
  poll?: number
  /** an SQL expression whose values are the groups (dlock_claim's group_by) */
  groupBy?: string | null
  /** at most this many live claims per group, across all claimers; needs groupBy */
  perGroup?: number | null
  /** fill a batch round-robin across groups; needs groupBy */
  fair?: boolean
  /** seconds: a failed or expired row is not claimable again before this, doubling per attempt */
  backoff?: number | null
  /** seconds: the cap of the doubling backoff */
  backoffMax?: number | null
  /** seconds a row given back as failed (Batch.fail, work's handler rejecting) is not claimable; default null: the backoff */
  retryAfter?: number | null
  untilEmpty?: boolean
  signal?: AbortSignal
  onLost?: (batch: Batch, err: LeaseLostError) => void
}

export declare class Batch<Row extends Record<string, any> = Record<string, any>> {
  readonly rows: Row[]
  readonly keys: any[]
  readonly outstanding: any[]
  readonly signal: AbortSignal
  readonly lost: boolean
  readonly lostReason: string | null
  check(): void
  complete(keys?: any[] | null, client?: PoolClient | Client): Promise<any[]>
  unclaim(keys?: any[] | null, client?: PoolClient | Client): Promise<number>
  /** dlock_unclaim(table, holder, keys, retryAfter): given back as failed, not claimable before retryAfter seconds
   *  (default: the loop's retryAfter; null there too: the claim's backoff) */
  fail(keys?: any[] | null, client?: PoolClient | Client | null, retryAfter?: number | null): Promise<number>
}

export interface WorkOptions extends ClaimOptions {
  /** called when the handler rejects (default: a process warning); the batch is given back as failed */
  onError?: (err: unknown, batch: Batch) => void
}

export declare function claims<Row extends Record<string, any> = Record<string, any>>(
  pool: Pools, table: string, holder: string, options?: ClaimOptions): AsyncGenerator<Batch<Row>, void, undefined>

export declare function work<Row extends Record<string, any> = Record<string, any>>(
  pool: Pools, table: string, holder: string, options: WorkOptions,
  handler: (batch: Batch<Row>, signal: AbortSignal) => Promise<unknown> | unknown): Promise<void>
export declare function work<Row extends Record<string, any> = Record<string, any>>(
  pool: Pools, table: string, holder: string,
  handler: (batch: Batch<Row>, signal: AbortSignal) => Promise<unknown> | unknown): Promise<void>

export declare class DlockError extends Error {}
export declare class NotAcquiredError extends DlockError { code: 'DLOCK_NOT_ACQUIRED' }
export declare class LeaseLostError extends DlockError { code: 'DLOCK_LEASE_LOST' }
/** A dlock call the server refused (`sqlstate`, also `code`), or that no server answered (`sqlstate` null). */
export declare class DatabaseError extends DlockError { code: string; sqlstate: string | null; cause?: unknown }
/** No answer in time: the call's outcome is unknown. */
export declare class TimeoutError extends DatabaseError { code: 'DLOCK_TIMEOUT'; sqlstate: null }
/** A lease of this process (acquiring, held, or lost but not yet released) has this key with this holder. */
export declare class HolderInUseError extends DlockError { code: 'DLOCK_HOLDER_IN_USE' }
export declare const version: string
