package dlock;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;

/**
 * A held lease: one key, one place of a counting semaphore, a shared lease,
 * or several keys at once. Taken by {@link Dlock#acquire} or
 * {@link Dlock#acquireAll}; released by {@link #close()} (so that
 * try-with-resources releases it) or {@link #release()}.
 *
 * <p>The lease keeps one connection of the {@link DataSource} for its life:
 * the acquire, the renewals (every ttl/3, on a daemon thread of its own) and
 * the release run there, never behind the application's queries. It is lost
 * when a renewal is refused (it expired, was force-released or taken over)
 * or when the ttl has passed on the monotonic clock since the sending of the
 * last renewal the server confirmed; then {@link #lost()} is completed,
 * {@link #check()} throws and no renewal is sent any more. A restart or
 * failover of the server shorter than the ttl is not a loss.
 *
 * <p>Its methods are safe for use from several threads.
 */
public final class Lease implements AutoCloseable {
    static final String REFUSED = "the server refused the renewal (expired, force-released or taken over)";
    static final String NO_RENEWAL = "no renewal was confirmed within the ttl";
    static final String FENCE_NO = "the fence (dlock_validate) said no";


    private final DataSource ds;
    private final Target target;
    private final String holder;
    private final long ttlNanos;
    private final long waitNanos;
    private long[] tokens;

    private final CompletableFuture<LeaseLostException> lost = new CompletableFuture<>();
    /** Two daemon threads: the renewals, and the deadline's check (a renewal may hang). */
    private final ScheduledThreadPoolExecutor timers;

    /** The connection's statements, one at a time. */
    private final Object io = new Object();
    private Connection conn; // guarded by io; null after a failure

    private final Object state = new Object();
    private long deadline; // guarded by state: sending of the last confirmed renewal + ttl (System.nanoTime)
    private LeaseLostException lostWhy; // guarded by state
    private boolean stopped; // guarded by state: the release has begun, no renewal any more
    private ScheduledFuture<?> nextRenewal; // guarded by state

    private final Object releasing = new Object();
    private boolean releaseDone; // guarded by releasing
    private boolean releaseAnswer;
    private DlockException releaseError;

    private Lease(DataSource ds, Target target, Options o) {
        this.ds = ds;
        this.target = target;
        this.holder = o.holder;
        this.ttlNanos = o.ttl.toNanos();
        this.waitNanos = o.wait.toNanos();
        this.timers = Timers.daemons("dlock-lease");
    }

    /** Takes the lease: the key and holder for this process, then the server's tokens. */
    static Lease acquire(DataSource ds, Target target, Options o) {
        Holders.takeKeys(target.keys, o.holder);
        Lease l = new Lease(ds, target, o);
        long sent;
        try {
            sent = l.acquireTokens();
        } catch (RuntimeException e) {
            l.closeConn();
            l.timers.shutdownNow();
            Holders.freeKeys(target.keys, o.holder);
            throw e;
        }
        synchronized (l.state) {
            l.deadline = sent + l.ttlNanos;
            l.scheduleRenewal(l.ttlNanos / 3);
        }
        l.timers.schedule(l::checkDeadline, l.ttlNanos, TimeUnit.NANOSECONDS);
        return l;
    }

    /**
     * Runs the acquire on the lease's own connection. An acquire whose
     * answer got lost (the connection broke) is repeated with the same
     * holder while the wait lasts (once at least): the server gives the same
     * token. One given up is forgotten: released by holder.
     *
     * @return when the granted acquire was sent (System.nanoTime)
     */
    private long acquireTokens() {
        long until = System.nanoTime() + waitNanos;
        for (int attempt = 0;; attempt++) {
            long sent = System.nanoTime();
            long left = Math.max(0, until - sent);
            try {
                String answer;
                synchronized (io) {
                    try (PreparedStatement ps = connection().prepareStatement(target.acquireSql())) {
                        ps.setString(1, target.keysJson());
                        ps.setString(2, holder);
                        ps.setLong(3, ttlNanos / 1000);
                        ps.setLong(4, left / 1000);
                        // each try is given up max(ttl, 5 s) after what is left of the wait
                        long limit = left + Math.max(ttlNanos, TimeUnit.SECONDS.toNanos(5));
                        ps.setQueryTimeout((int) Math.min(Integer.MAX_VALUE, (limit + 999_999_999L) / 1_000_000_000L));
                        try (ResultSet rs = ps.executeQuery()) {
                            answer = rs.next() ? rs.getString(1) : null;
                        }
                    }
                }
                long[] t = target.tokens(answer);
                if (t == null) {
                    closeConn();
                    throw new NotAcquiredException("dlock: not acquired: " + target.keys + " within "
                            + Duration.ofNanos(waitNanos));
                }
                tokens = t;
                return sent;
            } catch (SQLException e) {
                closeConn();
                // the driver cancels a statement past its query timeout: 57014
                boolean timedOut = "57014".equals(e.getSQLState());
                boolean noAnswer = timedOut || retryable(e);
                if (!noAnswer || (attempt > 0 && System.nanoTime() - until >= 0)) {
                    if (noAnswer) {
                        forget();
                    }
                    throw timedOut ? new CallTimeoutException(e) : new DatabaseException(e);
                }
                if (!pause()) {
                    forget();
                    throw new DlockException("dlock: interrupted while acquiring " + target.keys, e);
                }
            }
        }
    }

    /** No server answered (or it is shutting down): the call may be tried again. */
    private static boolean retryable(SQLException e) {
        String s = DatabaseException.serverState(e);
        return s == null || s.startsWith("57P");
    }

    /**
     * Releases, by holder, what an acquire whose answer never came may have
     * taken, in the background (the caller has its answer already).
     */
    private void forget() {
        Thread th = new Thread(() -> {
            try (Connection c = ds.getConnection(); PreparedStatement ps = c.prepareStatement(Target.FORGET_SQL)) {
                ps.setQueryTimeout(10);
                ps.setString(1, holder);
                ps.setString(2, target.keysJson());
                ps.execute();
            } catch (SQLException e) {
                // nothing was taken, or the server is still away: its ttl frees it
            }
        }, "dlock-forget");
        th.setDaemon(true);
        th.start();
    }

    /** The lease's connection (opened if need be), in autocommit mode; called under io. */
    private Connection connection() throws SQLException {
        if (conn == null) {
            Connection c = ds.getConnection();
            try {
                c.setAutoCommit(true);
            } catch (SQLException e) {
                c.close();
                throw e;
            }
            conn = c;
        }
        return conn;
    }

    /** Gives the lease's connection back to the data source (a broken one too). */
    private void closeConn() {
        synchronized (io) {
            if (conn != null) {
                try {
                    conn.close();
                } catch (SQLException e) {
                    // broken already
                }
                conn = null;
            }
        }
    }

    /** A failed renewal or acquire is tried again every ttl/15, at least 0.2 s. */
    private long retryPauseNanos() {
        return Math.max(ttlNanos / 15, TimeUnit.MILLISECONDS.toNanos(200));
    }

    /** Sleeps for the retry pause: false when interrupted (the interrupt is kept). */
    private boolean pause() {
        try {
            TimeUnit.NANOSECONDS.sleep(retryPauseNanos());
            return true;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /** Schedules the next renewal; called under state. */
    private void scheduleRenewal(long delayNanos) {
        if (stopped || lostWhy != null) {
            return;
        }
        try {
            nextRenewal = timers.schedule(this::renewal, delayNanos, TimeUnit.NANOSECONDS);
        } catch (RejectedExecutionException e) {
            // released or lost meanwhile
        }
    }

    /**
     * One renewal, on the lease's connection, and the next one scheduled:
     * every ttl/3 while confirmed; after a failure (server down, restarting,
     * failing over) every ttl/15 on a new connection. Each call is bounded
     * by the lease's deadline. A refused renewal is a loss.
     */
    private void renewal() {
        long sent = System.nanoTime();
        long dl;
        boolean expired;
        synchronized (state) {
            if (stopped || lostWhy != null) {
                return;
            }
            dl = deadline;
            expired = expired(sent);
        }
        if (expired) {
            lose(NO_RENEWAL);
            return;
        }
        Boolean ok;
        try {
            ok = renewOnce(dl - sent);
        } catch (SQLException | RuntimeException e) {
            closeConn();
            synchronized (state) {
                scheduleRenewal(retryPauseNanos());
            }
            return;
        }
        if (ok == null) {
            return; // released meanwhile
        }
        if (!ok) {
            lose(REFUSED);
            return;
        }
        synchronized (state) {
            if (sent + ttlNanos - deadline > 0) {
                deadline = sent + ttlNanos;
            }
            scheduleRenewal(ttlNanos / 3);
        }
    }

    /** dlock_renew of every key, bounded by what is left of the ttl: null when released meanwhile. */
    private Boolean renewOnce(long leftNanos) throws SQLException {
        synchronized (io) {
            synchronized (state) {
                if (stopped || lostWhy != null) {
                    return null;
                }
            }
            try (PreparedStatement ps = connection().prepareStatement(Target.RENEW_SQL)) {
                ps.setQueryTimeout((int) Math.max(1, (leftNanos + 999_999_999L) / 1_000_000_000L));
                ps.setString(1, holder);
                ps.setLong(2, ttlNanos / 1000);
                ps.setString(3, target.tokensJson(tokens));
                try (ResultSet rs = ps.executeQuery()) {
                    return rs.next() && rs.getBoolean(1);
                }
            }
        }
    }

    /** Runs when the deadline may have passed: a renewal confirmed meanwhile has moved it. */
    private void checkDeadline() {
        synchronized (state) {
            if (lostWhy != null) {
                return;
            }
            long now = System.nanoTime();
            if (!expired(now)) {
                try {
                    timers.schedule(this::checkDeadline, deadline - now, TimeUnit.NANOSECONDS);
                } catch (RejectedExecutionException e) {
                    // shut down: released
                }
                return;
            }
        }
        lose(NO_RENEWAL);
    }

    /**
     * The loss rule by time: the ttl has passed, on the monotonic clock,
     * since the sending of the last renewal the server confirmed (the
     * acquire, at first). Called under state.
     */
    private boolean expired(long now) {
        return now - deadline >= 0;
    }

    /** Ends the lease once: no renewal after it, {@link #lost()} completed. */
    private void lose(String reason) {
        LeaseLostException e;
        synchronized (state) {
            if (lostWhy != null) {
                return;
            }
            e = new LeaseLostException(target.keys.get(0), reason);
            lostWhy = e;
            if (nextRenewal != null) {
                nextRenewal.cancel(false);
            }
        }
        timers.shutdown();
        lost.complete(e);
    }

    /**
     * The fencing token (of the first key, for {@link Dlock#acquireAll}): a
     * 64-bit integer that only grows from one holder of the key to the next.
     *
     * @return the token
     */
    public long token() {
        return tokens[0];
    }

    /**
     * Each key's token, in the keys' order.
     *
     * @return a new map from key to token
     */
    public Map<String, Long> tokens() {
        Map<String, Long> m = new LinkedHashMap<>();
        for (int i = 0; i < target.keys.size(); i++) {
            m.put(target.keys.get(i), tokens[i]);
        }
        return m;
    }

    /**
     * The lease's key (the first, for {@link Dlock#acquireAll}).
     *
     * @return the key
     */
    public String key() {
        return target.keys.get(0);
    }

    /**
     * The lease's keys, without repetitions, in the order given.
     *
     * @return an unmodifiable list
     */
    public List<String> keys() {
        return target.keys;
    }

    /**
     * The holder the lease was taken for.
     *
     * @return the holder's name
     */
    public String holder() {
        return holder;
    }

    /**
     * Completed when the lease is lost, or released (then
     * {@link LeaseLostException#released()} is true), with the reason; never
     * completed exceptionally. Actions attached with {@code thenAccept} run
     * on the lease's thread: keep them short, or use {@code thenAcceptAsync},
     * and do not release the lease from them.
     *
     * @return the future of the loss
     */
    public CompletableFuture<LeaseLostException> lost() {
        return lost;
    }

    /**
     * What is left of the ttl since the sending of the last renewal the
     * server confirmed (on the monotonic clock); zero once lost.
     *
     * @return the time left
     */
    public Duration remaining() {
        synchronized (state) {
            if (lostWhy != null) {
                return Duration.ZERO;
            }
            return Duration.ofNanos(Math.max(0, deadline - System.nanoTime()));
        }
    }

    /**
     * Returns while the lease is held; throws once it is lost or released,
     * or its ttl ran out since the last confirmed renewal (then the lease is
     * lost).
     *
     * @throws LeaseLostException when the lease is no longer held
     */
    public void check() {
        LeaseLostException e;
        boolean expired;
        synchronized (state) {
            e = lostWhy;
            expired = expired(System.nanoTime());
        }
        if (e == null && expired) {
            lose(NO_RENEWAL);
            synchronized (state) {
                e = lostWhy;
            }
        }
        if (e != null) {
            throw new LeaseLostException(e.key(), e.reason());
        }
    }

    /**
     * Fences the transaction of {@code conn} with the lease:
     * {@code dlock_validate(key, holder, token)} of each key, in it. Once it
     * returns, nobody can take the lease over, renew or release it until the
     * transaction ends, so every write of the transaction that follows is the
     * holder's (and passes a {@code dlock_guard} on the table). When it says
     * no, the lease is lost and {@link LeaseLostException} is thrown: roll
     * the transaction back. {@code conn} must not be in autocommit mode (the
     * fence would end with its statement) and must be of the lease's role.
     *
     * @param conn a connection in a transaction (autocommit off)
     * @throws LeaseLostException when the lease is lost
     * @throws DatabaseException when the fence itself failed
     * @throws IllegalStateException when {@code conn} is in autocommit mode
     */
    public void fence(Connection conn) {
        check();
        try {
            if (conn.getAutoCommit()) {
                throw new IllegalStateException("dlock: fence needs a transaction: the connection is in autocommit mode");
            }
            boolean ok;
            try (PreparedStatement ps = conn.prepareStatement(Target.VALIDATE_SQL)) {
                ps.setString(1, holder);
                ps.setString(2, target.tokensJson(tokens));
                try (ResultSet rs = ps.executeQuery()) {
                    ok = rs.next() && rs.getBoolean(1);
                }
            }
            if (!ok) {
                lose(FENCE_NO);
                check();
            }
        } catch (SQLException e) {
            throw new DatabaseException(e);
        }
    }

    /**
     * Runs {@code sql} fenced by the lease: {@link #fence} then the
     * statement, in the same transaction. With {@code conn} in a transaction
     * (autocommit off) both run in it and you commit; with {@code conn} in
     * autocommit mode, this method makes the transaction: fence, statement
     * and commit (a rollback on any failure), and autocommit is on again
     * after it. When the fence says no, {@code sql} is not run and
     * {@link LeaseLostException} is thrown: nothing was written.
     *
     * @param conn the connection to run it on
     * @param sql the statement, with {@code ?} placeholders
     * @param args the placeholders' values ({@code setObject})
     * @return the statement's update count, or -1 when it returned rows
     * @throws SQLException the statement's own error, the driver's, unchanged
     * @throws LeaseLostException when the lease is lost
     * @throws DatabaseException when the fence itself failed
     */
    public int execute(Connection conn, String sql, Object... args) throws SQLException {
        if (!conn.getAutoCommit()) {
            fence(conn);
            return run(conn, sql, args);
        }
        conn.setAutoCommit(false);
        boolean committed = false;
        try {
            fence(conn);
            int n = run(conn, sql, args);
            conn.commit();
            committed = true;
            return n;
        } finally {
            if (!committed) {
                try {
                    conn.rollback();
                } catch (SQLException e) {
                    // the connection is broken: its transaction is gone
                }
            }
            conn.setAutoCommit(true);
        }
    }

    private static int run(Connection conn, String sql, Object... args) throws SQLException {
        try (PreparedStatement ps = conn.prepareStatement(sql)) {
            for (int i = 0; i < args.length; i++) {
                ps.setObject(i + 1, args[i]);
            }
            return ps.execute() ? -1 : ps.getUpdateCount();
        }
    }

    /**
     * Stops the renewals for good and releases the lease with its token(s)
     * ({@code dlock_release(key, holder, token)}: another holder's lease is
     * never released), retried while the lease could still be held. Then
     * the key and holder are free for another lease of this process, and
     * {@link #lost()} is completed (released). Idempotent: a second call
     * gives the first's answer.
     *
     * @return true when the lease was still held (every key, for several)
     * @throws DatabaseException when the release failed (it lapses at its ttl)
     */
    public boolean release() {
        synchronized (releasing) {
            if (!releaseDone) {
                synchronized (state) {
                    stopped = true;
                    if (nextRenewal != null) {
                        nextRenewal.cancel(false);
                    }
                }
                try {
                    releaseAnswer = releaseOnServer();
                } catch (DlockException e) {
                    releaseError = e;
                } finally {
                    releaseDone = true;
                    lose(LeaseLostException.RELEASED);
                    timers.shutdownNow();
                    closeConn();
                    Holders.freeKeys(target.keys, holder);
                }
            }
            if (releaseError != null) {
                throw releaseError;
            }
            return releaseAnswer;
        }
    }

    private boolean releaseOnServer() {
        for (;;) {
            try {
                synchronized (io) {
                    try (PreparedStatement ps = connection().prepareStatement(Target.RELEASE_SQL)) {
                        ps.setString(1, holder);
                        ps.setString(2, target.tokensJson(tokens));
                        try (ResultSet rs = ps.executeQuery()) {
                            return rs.next() && rs.getBoolean(1);
                        }
                    }
                }
            } catch (SQLException e) {
                closeConn();
                boolean expired;
                synchronized (state) {
                    expired = expired(System.nanoTime());
                }
                if (!retryable(e) || expired) {
                    throw new DatabaseException(e);
                }
                if (!pause()) {
                    throw new DlockException("dlock: interrupted while releasing " + target.keys, e);
                }
            }
        }
    }

    /**
     * Releases the lease ({@link #release()}), for try-with-resources.
     *
     * @throws DatabaseException when the release failed
     */
    @Override
    public void close() {
        release();
    }
}
