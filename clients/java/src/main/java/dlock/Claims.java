package dlock;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Types;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;

/**
 * The claim loop over a table of yours (a single-column primary key): each
 * {@link #next()} claims up to n rows with {@code dlock_claim} and hands
 * them out as a {@link Batch}, whose claims are renewed every ttl/3 on the
 * loop's own connection while you work on them. The claims of a batch that
 * were neither completed nor given back are given back (attempts kept) when
 * the next batch is asked for or the loop is closed. Made by
 * {@link Dlock#claims}; iterable ({@code for (Batch b : loop)}), once.
 *
 * <p>When no row is to be had, {@link #next()} waits {@code poll} and looks
 * again, or returns null with {@link ClaimOptions#untilEmpty()}, or once
 * {@link #close()} was called (from another thread too).
 */
public final class Claims implements Iterable<Batch>, AutoCloseable {
    private static final String MICROS = "::bigint * interval '1 microsecond'";
    private static final String DESCRIBE = "SELECT c.oid::pg_catalog.regclass::text, a.attname::text,"
            + " pg_catalog.format_type(a.atttypid, a.atttypmod)"
            + " FROM pg_catalog.pg_index i"
            + " JOIN pg_catalog.pg_class c ON c.oid = i.indrelid"
            + " JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]"
            + " WHERE i.indrelid = ?::pg_catalog.regclass AND i.indisprimary AND i.indnatts = 1";

    private final DataSource ds;
    final String holder;
    final ClaimOptions options;
    final String table;
    final String pk;
    private final String pktype;
    final ScheduledThreadPoolExecutor timers;

    private final Object io = new Object();
    private Connection conn; // guarded by io

    private Batch current; // the batch handed out last
    private volatile boolean closed;
    private boolean ended;
    private boolean iterated;

    private Claims(DataSource ds, String holder, ClaimOptions o, String[] described) {
        this.ds = ds;
        this.holder = holder;
        this.options = o;
        this.table = described[0];
        this.pk = described[1];
        this.pktype = described[2];
        this.timers = Timers.daemons("dlock-claims");
    }

    /** Opens the loop: the table's name, primary key and its type, from the server. */
    static Claims open(DataSource ds, String table, String holder, ClaimOptions o) {
        String[] d;
        try (Connection c = ds.getConnection(); PreparedStatement ps = c.prepareStatement(DESCRIBE)) {
            ps.setString(1, table);
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    throw new DlockException("dlock: \"" + table
                            + "\" has no single-column primary key: dlock_claim needs one");
                }
                d = new String[] {rs.getString(1), rs.getString(2), rs.getString(3)};
            }
        } catch (SQLException e) {
            throw new DatabaseException(e);
        }
        return new Claims(ds, holder, o, d);
    }

    /** A statement on the loop's connection. */
    interface Call<T> {
        T run(Connection c) throws SQLException;
    }

    /**
     * Runs call on the loop's own connection (opened if need be, in
     * autocommit mode), one statement at a time; a broken connection is
     * dropped. Throws the driver's error.
     */
    <T> T onOwn(Call<T> call) throws SQLException {
        synchronized (io) {
            if (conn == null) {
                Connection c = ds.getConnection();
                c.setAutoCommit(true);
                conn = c;
            }
            try {
                return call.run(conn);
            } catch (SQLException e) {
                try {
                    conn.close();
                } catch (SQLException e2) {
                    e.addSuppressed(e2);
                }
                conn = null;
                throw e;
            }
        }
    }

    /** The keys as a typed array expression over a JSON parameter. */
    String keysArray() {
        return "ARRAY(SELECT json_array_elements_text(?::json))::" + pktype + "[]";
    }

    static String keysJson(Collection<?> keys) {
        StringBuilder b = new StringBuilder("[");
        for (Object k : keys) {
            if (b.length() > 1) {
                b.append(',');
            }
            b.append('"');
            String s = String.valueOf(k);
            for (int i = 0; i < s.length(); i++) {
                char ch = s.charAt(i);
                if (ch == '"' || ch == '\\') {
                    b.append('\\').append(ch);
                } else if (ch < 0x20) {
                    b.append(String.format("\\u%04x", (int) ch));
                } else {
                    b.append(ch);
                }
            }
            b.append('"');
        }
        return b.append(']').toString();
    }

    /** dlock_complete, dlock_unclaim (with retryAfter when fail), on conn or the loop's connection. */
    List<Object> completeKeys(Collection<?> keys, Connection c) throws SQLException {
        String sql = "SELECT k FROM dlock_complete(?::regclass, ?, " + keysArray() + ") AS c(k)";
        Call<List<Object>> call = cn -> {
            try (PreparedStatement ps = cn.prepareStatement(sql)) {
                ps.setString(1, table);
                ps.setString(2, holder);
                ps.setString(3, keysJson(keys));
                List<Object> done = new ArrayList<>();
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        done.add(rs.getObject(1));
                    }
                }
                return done;
            }
        };
        return c == null ? onOwn(call) : call.run(c);
    }

    long unclaimKeys(Collection<?> keys, Connection c, boolean failed, java.time.Duration retryAfter)
            throws SQLException {
        String sql = "SELECT dlock_unclaim(?::regclass, ?, " + keysArray()
                + (failed ? ", ?" + MICROS : "") + ")";
        Call<Long> call = cn -> {
            try (PreparedStatement ps = cn.prepareStatement(sql)) {
                ps.setString(1, table);
                ps.setString(2, holder);
                ps.setString(3, keysJson(keys));
                if (failed) {
                    if (retryAfter == null) {
                        ps.setNull(4, Types.BIGINT);
                    } else {
                        ps.setLong(4, retryAfter.toNanos() / 1000);
                    }
                }
                try (ResultSet rs = ps.executeQuery()) {
                    return rs.next() ? rs.getLong(1) : 0L;
                }
            }
        };
        return c == null ? onOwn(call) : call.run(c);
    }

    /** dlock_renew_claims: how many of the holder's claims on the table it renewed. */
    long renewClaims(long leftNanos) throws SQLException {
        return onOwn(c -> {
            try (PreparedStatement ps = c.prepareStatement(
                    "SELECT dlock_renew_claims(?::regclass, ?, ?" + MICROS + ")")) {
                ps.setQueryTimeout((int) Math.max(1, (leftNanos + 999_999_999L) / 1_000_000_000L));
                ps.setString(1, table);
                ps.setString(2, holder);
                ps.setLong(3, options.ttl.toNanos() / 1000);
                try (ResultSet rs = ps.executeQuery()) {
                    return rs.next() ? rs.getLong(1) : 0L;
                }
            }
        });
    }

    /**
     * dlock_claim's named arguments of the options that are set, as SQL
     * after its first six; their values are added to values.
     */
    private String namedArguments(List<Object> values) {
        StringBuilder sql = new StringBuilder();
        ClaimOptions o = options;
        if (o.wait != null && !o.wait.isZero()) {
            sql.append(", wait => ?").append(MICROS);
            values.add(o.wait.toNanos() / 1000);
        }
        if (o.backoff != null) {
            sql.append(", backoff => ?").append(MICROS);
            values.add(o.backoff.toNanos() / 1000);
        }
        if (o.backoffMax != null) {
            sql.append(", backoff_max => ?").append(MICROS);
            values.add(o.backoffMax.toNanos() / 1000);
        }
        if (o.groupBy != null) {
            sql.append(", group_by => ?::text");
            values.add(o.groupBy);
        }
        if (o.perGroup != null) {
            sql.append(", per_group => ?::integer");
            values.add(o.perGroup);
        }
        if (o.fair) {
            sql.append(", fair => true");
        }
        return sql.toString();
    }

    /** One dlock_claim call: the rows, whole, in the order claimed. */
    private List<Map<String, Object>> claimRows() throws SQLException {
        List<Object> named = new ArrayList<>();
        String sql = "SELECT * FROM dlock_claim(NULL::" + table + ", ?, ?, ?" + MICROS + ", ?, ?, ?"
                + namedArguments(named) + ")";
        return onOwn(c -> {
            try (PreparedStatement ps = c.prepareStatement(sql)) {
                for (int i = 0; i < named.size(); i++) {
                    ps.setObject(7 + i, named.get(i));
                }
                ps.setString(1, holder);
                ps.setInt(2, options.n);
                ps.setLong(3, options.ttl.toNanos() / 1000);
                ps.setString(4, options.filter);
                ps.setString(5, options.orderBy);
                if (options.maxAttempts == null) {
                    ps.setNull(6, Types.INTEGER);
                } else {
                    ps.setInt(6, options.maxAttempts);
                }
                List<Map<String, Object>> rows = new ArrayList<>();
                try (ResultSet rs = ps.executeQuery()) {
                    ResultSetMetaData md = rs.getMetaData();
                    while (rs.next()) {
                        Map<String, Object> row = new LinkedHashMap<>();
                        for (int i = 1; i <= md.getColumnCount(); i++) {
                            row.put(md.getColumnLabel(i), rs.getObject(i));
                        }
                        rows.add(row);
                    }
                }
                return rows;
            }
        });
    }

    /**
     * The next batch: the claims the last one still holds are given back
     * first, then up to n rows are claimed; when none is to be had, this
     * waits poll and looks again (or returns null with untilEmpty).
     *
     * @return the batch, or null when the loop is over (untilEmpty, or closed)
     * @throws DatabaseException when a claim failed
     */
    public Batch next() {
        finishCurrent();
        while (!closed && !ended) {
            long sent = System.nanoTime();
            List<Map<String, Object>> rows;
            try {
                rows = claimRows();
            } catch (SQLException e) {
                throw new DatabaseException(e);
            }
            if (!rows.isEmpty()) {
                Batch b = new Batch(this, rows, sent);
                synchronized (this) {
                    if (!closed) {
                        current = b;
                        return b;
                    }
                }
                b.endBatch(); // closed meanwhile: given back
                return null;
            }
            if (options.untilEmpty) {
                ended = true;
                break;
            }
            // a call that waited in the server looks again at once
            long until = System.nanoTime()
                    + (options.wait != null && !options.wait.isZero() ? 0 : options.poll.toNanos());
            while (!closed && System.nanoTime() - until < 0) {
                try {
                    TimeUnit.NANOSECONDS.sleep(Math.min(until - System.nanoTime(), 50_000_000L));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new DlockException("dlock: interrupted while waiting for rows of " + table, e);
                }
            }
        }
        return null;
    }

    /** Ends the current batch: its renewals stop, what it still holds is given back. */
    private void finishCurrent() {
        Batch b;
        synchronized (this) {
            b = current;
            current = null;
        }
        if (b != null) {
            b.endBatch();
        }
    }

    /**
     * The batches, as {@link #next()} gives them, until it returns null. A
     * loop is iterated once.
     *
     * @return the iterator
     */
    @Override
    public synchronized Iterator<Batch> iterator() {
        if (iterated) {
            throw new IllegalStateException("dlock: a claim loop is iterated once");
        }
        iterated = true;
        return new Iterator<Batch>() {
            private Batch ahead;
            private boolean done;

            @Override
            public boolean hasNext() {
                if (ahead == null && !done) {
                    ahead = Claims.this.next();
                    done = ahead == null;
                }
                return ahead != null;
            }

            @Override
            public Batch next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                Batch b = ahead;
                ahead = null;
                return b;
            }
        };
    }

    /**
     * Ends the loop: a {@link #next()} waiting for rows returns null, the
     * current batch's renewals stop and what it still holds is given back,
     * and the loop's connection is closed. Idempotent.
     */
    @Override
    public void close() {
        closed = true;
        synchronized (this) {
            finishCurrent();
            timers.shutdownNow();
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
    }
}
