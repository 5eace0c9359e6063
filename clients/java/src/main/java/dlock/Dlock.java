package dlock;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import javax.sql.DataSource;

/**
 * The Java client of dlock, the PostgreSQL extension that makes the
 * database a lock service: lease locks with fencing tokens, counting
 * semaphores, shared leases and several keys at once, over JDBC.
 *
 * <pre>{@code
 * try (Lease lease = Dlock.acquire(ds, "nightly-report", Duration.ofSeconds(30), Duration.ofSeconds(10))) {
 *     lease.execute(conn, "UPDATE report SET last_run = now() WHERE id = ?", 7);
 * } catch (NotAcquiredException e) {
 *     // someone else runs it
 * }
 * }</pre>
 *
 * <p>See {@link Lease} for the renewals and the loss rule.
 */
public final class Dlock {
    private Dlock() {
    }

    /**
     * New options, to pass to {@link #acquire(DataSource, String, Options)}.
     *
     * @return the defaults: ttl 30 s, no waiting, a holder unique to the lease
     */
    public static Options options() {
        return new Options();
    }

    /**
     * Takes a lease on key ({@code dlock_acquire(key, holder, ttl, wait)}).
     *
     * @param ds where the lease's own connection comes from (kept for the lease's life)
     * @param key the key
     * @param ttl how long it lasts unless renewed (renewed every ttl/3)
     * @param wait how long to wait for it in the key's FIFO queue
     * @return the lease
     * @throws NotAcquiredException when someone else kept it for the wait
     * @throws HolderInUseException never with the default holder
     * @throws DatabaseException when the acquire failed
     */
    public static Lease acquire(DataSource ds, String key, Duration ttl, Duration wait) {
        return acquire(ds, key, new Options().ttl(ttl).waitFor(wait));
    }

    /**
     * Takes a lease on key with these options: a lease, one of n places
     * ({@link Options#slots}), or a shared lease ({@link Options#shared}).
     *
     * @param ds where the lease's own connection comes from (kept for the lease's life)
     * @param key the key
     * @param options ttl, wait, holder and shape
     * @return the lease
     * @throws NotAcquiredException when someone else kept it for the wait
     * @throws HolderInUseException when another lease of this process has the key with this holder
     * @throws DatabaseException when the acquire failed
     */
    public static Lease acquire(DataSource ds, String key, Options options) {
        Objects.requireNonNull(ds, "ds");
        Objects.requireNonNull(key, "key");
        Options o = options.checked();
        return Lease.acquire(ds, new Target(List.of(key), o.slots, o.shared, false), o);
    }

    /**
     * Takes every key or none ({@code dlock_acquire_all}), each an ordinary
     * lease with its own token ({@link Lease#tokens()}); renewed, fenced,
     * lost and released together.
     *
     * @param ds where the lease's own connection comes from
     * @param keys the keys (repetitions are dropped)
     * @param ttl how long they last unless renewed
     * @param wait how long to wait for all of them
     * @return the lease of every key
     * @throws NotAcquiredException when not all were had within the wait (then nothing is held or queued)
     * @throws DatabaseException when the acquire failed
     */
    public static Lease acquireAll(DataSource ds, Collection<String> keys, Duration ttl, Duration wait) {
        return acquireAll(ds, keys, new Options().ttl(ttl).waitFor(wait));
    }

    /**
     * Takes every key or none, with these options (ttl, wait, holder: not
     * slots nor shared).
     *
     * @param ds where the lease's own connection comes from
     * @param keys the keys (repetitions are dropped)
     * @param options ttl, wait and holder
     * @return the lease of every key
     * @throws NotAcquiredException when not all were had within the wait (then nothing is held or queued)
     * @throws HolderInUseException when another lease of this process has a key with this holder
     * @throws DatabaseException when the acquire failed
     */
    public static Lease acquireAll(DataSource ds, Collection<String> keys, Options options) {
        Objects.requireNonNull(ds, "ds");
        Options o = options.checked();
        if (keys == null || keys.isEmpty()) {
            throw new IllegalArgumentException("dlock: acquireAll needs at least one key");
        }
        if (o.slots > 0 || o.shared) {
            throw new IllegalArgumentException("dlock: acquireAll takes leases, not semaphore places or shared leases");
        }
        List<String> uniq = new ArrayList<>(new LinkedHashSet<>(keys));
        for (String k : uniq) {
            Objects.requireNonNull(k, "a key");
        }
        return Lease.acquire(ds, new Target(uniq, 0, false, true), o);
    }

    /**
     * New claim options, to pass to {@link #claims}.
     *
     * @return the defaults: 10 rows a batch, ttl 30 s, every row, poll every second
     */
    public static ClaimOptions claimOptions() {
        return new ClaimOptions();
    }

    /**
     * The claim loop over table (a single-column primary key) for holder:
     * batches of up to n rows claimed with {@code dlock_claim}, renewed
     * while worked on, given back unless completed. The loop keeps one
     * connection of {@code ds} while it runs.
     *
     * @param ds where the loop's own connection comes from
     * @param table the table's name, as SQL would write it
     * @param holder the claimer's name
     * @param options n, ttl, filter, orderBy, maxAttempts, poll, untilEmpty, retryAfter
     * @return the loop: close it (try-with-resources)
     * @throws DatabaseException when the table cannot be looked up
     * @throws DlockException when the table has no single-column primary key
     */
    public static Claims claims(DataSource ds, String table, String holder, ClaimOptions options) {
        Objects.requireNonNull(ds, "ds");
        Objects.requireNonNull(table, "table");
        if (holder == null || holder.isEmpty()) {
            throw new IllegalArgumentException("dlock: holder must be a non-empty string");
        }
        return Claims.open(ds, table, holder, options.checked());
    }
}
