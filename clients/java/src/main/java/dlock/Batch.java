package dlock;

import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * The rows one turn of a claim loop ({@link Claims}) claimed, whole, with
 * their claims renewed every ttl/3 on the loop's connection until the next
 * batch is asked for or the loop is closed. Complete or give back its rows
 * through its methods (not by hand), so that it knows what it still holds.
 *
 * <p>Its claims are lost when a renewal renewed fewer claims than the batch
 * holds, or when no renewal was confirmed within the ttl (on the monotonic
 * clock, since the sending of the last one confirmed): then
 * {@link #lost()} is completed and {@link #check()} throws.
 */
public final class Batch {
    static final String FEWER = "a renewal renewed fewer claims than the batch holds";
    static final String NO_RENEWAL = "no renewal was confirmed within the ttl";

    private final Claims loop;
    private final List<Map<String, Object>> rows;
    private final List<Object> keys;
    private final long ttlNanos;
    private final List<Object> outstanding; // guarded by state
    private final CompletableFuture<LeaseLostException> lost = new CompletableFuture<>();

    private final Object state = new Object();
    private long deadline; // guarded by state (System.nanoTime)
    private LeaseLostException lostWhy; // guarded by state
    private boolean over; // guarded by state: the batch is over, no renewal
    private ScheduledFuture<?> nextRenewal; // guarded by state

    Batch(Claims loop, List<Map<String, Object>> rows, long sent) {
        this.loop = loop;
        this.rows = List.copyOf(rows);
        List<Object> k = new ArrayList<>();
        for (Map<String, Object> r : rows) {
            k.add(r.get(loop.pk));
        }
        this.keys = List.copyOf(k);
        this.outstanding = new ArrayList<>(k);
        this.ttlNanos = loop.options.ttl.toNanos();
        synchronized (state) {
            deadline = sent + ttlNanos;
            scheduleRenewal(ttlNanos / 3);
        }
        try {
            loop.timers.schedule(this::checkBatchDeadline, ttlNanos, TimeUnit.NANOSECONDS);
        } catch (RejectedExecutionException e) {
            // the loop is closed
        }
    }

    /**
     * The rows claimed, whole: column label to value ({@code getObject}).
     *
     * @return an unmodifiable list
     */
    public List<Map<String, Object>> rows() {
        return rows;
    }

    /**
     * The rows' primary keys, in the rows' order.
     *
     * @return an unmodifiable list
     */
    public List<Object> keys() {
        return keys;
    }

    /**
     * The keys whose claims the batch still holds, as far as it knows.
     *
     * @return a new list
     */
    public List<Object> outstanding() {
        synchronized (state) {
            return new ArrayList<>(outstanding);
        }
    }

    /**
     * Completed when the batch's claims are lost, or when the batch is over
     * (the next batch was asked for, or the loop closed: then
     * {@link LeaseLostException#released()} is true).
     *
     * @return the future of the loss
     */
    public CompletableFuture<LeaseLostException> lost() {
        return lost;
    }

    /**
     * Returns while the batch's claims are held; throws once they are lost
     * or the batch is over.
     *
     * @throws LeaseLostException when they are no longer held
     */
    public void check() {
        LeaseLostException e;
        boolean expired;
        synchronized (state) {
            e = lostWhy;
            expired = System.nanoTime() - deadline >= 0;
        }
        if (e == null && expired) {
            loseClaims(NO_RENEWAL);
            synchronized (state) {
                e = lostWhy;
            }
        }
        if (e != null) {
            throw new LeaseLostException("claims on", e.key(), e.reason());
        }
    }

    /**
     * Completes every claim the batch still holds ({@link #complete(Collection, Connection)}).
     *
     * @return the keys whose claims it still held: the only ones that count as done
     * @throws DatabaseException when the call failed
     */
    public List<Object> complete() {
        return complete(outstanding(), null);
    }

    /**
     * {@code dlock_complete} on keys: with conn, in its transaction (mark
     * the rows done in the same one); without (null), on the loop's
     * connection.
     *
     * @param keys the keys to complete
     * @param conn your connection, or null
     * @return the keys whose claims it still held: the only ones that count as done
     * @throws DatabaseException when the call failed
     */
    public List<Object> complete(Collection<?> keys, Connection conn) {
        try {
            List<Object> done = loop.completeKeys(keys, conn);
            dropKeys(keys);
            return done;
        } catch (SQLException e) {
            throw new DatabaseException(e);
        }
    }

    /**
     * {@code dlock_unclaim} on keys (attempts kept): with conn, in its
     * transaction; without (null), on the loop's connection.
     *
     * @param keys the keys to give back
     * @param conn your connection, or null
     * @return how many were given back
     * @throws DatabaseException when the call failed
     */
    public long unclaim(Collection<?> keys, Connection conn) {
        try {
            long n = loop.unclaimKeys(keys, conn, false, null);
            dropKeys(keys);
            return n;
        } catch (SQLException e) {
            throw new DatabaseException(e);
        }
    }

    /**
     * Gives keys back as failed ({@code dlock_unclaim(table, holder, keys,
     * retry_after)}, attempts kept): not claimable again before retryAfter
     * (null: the loop's {@link ClaimOptions#retryAfter}; null there too:
     * the claim's backoff).
     *
     * @param keys the keys to give back
     * @param conn your connection, or null for the loop's
     * @param retryAfter how long they stay unclaimable, or null
     * @return how many were given back
     * @throws DatabaseException when the call failed
     */
    public long fail(Collection<?> keys, Connection conn, Duration retryAfter) {
        try {
            long n = loop.unclaimKeys(keys, conn, true, retryAfter != null ? retryAfter : loop.options.retryAfter);
            dropKeys(keys);
            return n;
        } catch (SQLException e) {
            throw new DatabaseException(e);
        }
    }

    private void dropKeys(Collection<?> gone) {
        Set<String> g = new HashSet<>();
        for (Object k : gone) {
            g.add(String.valueOf(k));
        }
        synchronized (state) {
            outstanding.removeIf(k -> g.contains(String.valueOf(k)));
        }
    }

    private void scheduleRenewal(long delayNanos) {
        if (over || lostWhy != null) {
            return;
        }
        try {
            nextRenewal = loop.timers.schedule(this::renewBatch, delayNanos, TimeUnit.NANOSECONDS);
        } catch (RejectedExecutionException e) {
            // the loop is closed
        }
    }

    /** One renewal of the batch's claims, and the next one scheduled (as a lease's). */
    private void renewBatch() {
        long sent = System.nanoTime();
        long left;
        synchronized (state) {
            if (over || lostWhy != null) {
                return;
            }
            left = deadline - sent;
            if (outstanding.isEmpty()) {
                deadline = sent + ttlNanos; // nothing to renew, nothing to lose
                scheduleRenewal(ttlNanos / 3);
                return;
            }
        }
        if (left <= 0) {
            loseClaims(NO_RENEWAL);
            return;
        }
        long renewed;
        try {
            renewed = loop.renewClaims(left);
        } catch (SQLException | RuntimeException e) {
            synchronized (state) {
                scheduleRenewal(Math.max(ttlNanos / 15, TimeUnit.MILLISECONDS.toNanos(200)));
            }
            return;
        }
        boolean fewer;
        synchronized (state) {
            fewer = renewed < outstanding.size();
        }
        if (fewer) {
            loseClaims(FEWER);
            return;
        }
        synchronized (state) {
            if (sent + ttlNanos - deadline > 0) {
                deadline = sent + ttlNanos;
            }
            scheduleRenewal(ttlNanos / 3);
        }
    }

    private void checkBatchDeadline() {
        synchronized (state) {
            if (lostWhy != null || over) {
                return;
            }
            long left = deadline - System.nanoTime();
            if (left > 0) {
                try {
                    loop.timers.schedule(this::checkBatchDeadline, left, TimeUnit.NANOSECONDS);
                } catch (RejectedExecutionException e) {
                    // the loop is closed
                }
                return;
            }
        }
        loseClaims(NO_RENEWAL);
    }

    private void loseClaims(String reason) {
        LeaseLostException e;
        synchronized (state) {
            if (lostWhy != null) {
                return;
            }
            e = new LeaseLostException("claims on", loop.table, reason);
            lostWhy = e;
            if (nextRenewal != null) {
                nextRenewal.cancel(false);
            }
        }
        lost.complete(e);
    }

    /** The batch is over: no renewal, what it still holds given back, lost() completed (released). */
    void endBatch() {
        List<Object> left;
        synchronized (state) {
            over = true;
            if (nextRenewal != null) {
                nextRenewal.cancel(false);
            }
            left = new ArrayList<>(outstanding);
        }
        if (!left.isEmpty()) {
            try {
                unclaim(left, null);
            } catch (DlockException e) {
                // they lapse at their ttl
            }
        }
        loseClaims(LeaseLostException.RELEASED);
    }
}
