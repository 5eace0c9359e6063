package dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * Tests against a real server (scripts/test-clients.sh starts one), never a
 * mock:
 *
 * <pre>
 *   DLOCK_TEST_DSN     libpq keyword DSN of a database with the extension, as a superuser
 *   DLOCK_TEST_PGCTL   a command: `$DLOCK_TEST_PGCTL stop|start`
 * </pre>
 */
class LeaseTest {
    private static PGSimpleDataSource ds;
    private final List<Lease> leases = new ArrayList<>();
    private String name = "t";

    @BeforeAll
    static void dataSource() {
        ds = TestDb.dataSource();
    }

    @BeforeEach
    void named(TestInfo info) {
        name = info.getTestMethod().map(m -> m.getName()).orElse("t");
    }

    @AfterEach
    void releaseAll() {
        for (Lease l : leases) {
            try {
                l.release();
            } catch (DlockException e) {
                // the server may have been stopped
            }
        }
    }

    /** A key of this test alone. */
    private String key(String k) {
        return "java/" + name + "/" + k + "/" + System.nanoTime();
    }

    private Lease held(Lease l) {
        leases.add(l);
        return l;
    }

    private Lease acquire(String key, Options o) {
        return held(Dlock.acquire(ds, key, o));
    }

    /** The key's live holders and tokens (dlock_locks, as a superuser sees them). */
    private static Map<String, Long> holders(String key) throws SQLException {
        Map<String, Long> m = new HashMap<>();
        try (Connection c = ds.getConnection();
                PreparedStatement ps = c.prepareStatement("SELECT holder, token FROM dlock_locks WHERE key = ?")) {
            ps.setString(1, key);
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    m.put(rs.getString(1), rs.getLong(2));
                }
            }
        }
        return m;
    }

    private static long count(String sql, String arg) throws SQLException {
        try (Connection c = ds.getConnection(); PreparedStatement ps = c.prepareStatement(sql)) {
            ps.setString(1, arg);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }

    private static void sql(String sql, Object... args) throws SQLException {
        try (Connection c = ds.getConnection(); PreparedStatement ps = c.prepareStatement(sql)) {
            for (int i = 0; i < args.length; i++) {
                ps.setObject(i + 1, args[i]);
            }
            ps.execute();
        }
    }

    private static LeaseLostException lostWithin(Lease l, int seconds) throws InterruptedException {
        try {
            return l.lost().get(seconds, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            return fail("lost() not completed within " + seconds + " s");
        } catch (ExecutionException e) {
            return fail(e);
        }
    }

    @Test
    void acquireReleaseTokenGrows() throws SQLException {
        String k = key("a");
        long first;
        try (Lease l = Dlock.acquire(ds, k, Duration.ofSeconds(10), Duration.ZERO)) {
            first = l.token();
            assertEquals(Map.of(l.holder(), l.token()), holders(k));
            l.check();
            assertFalse(l.lost().isDone());
            assertThrows(NotAcquiredException.class, () -> acquire(k, Dlock.options()));
            assertTrue(l.release());
            assertEquals(Map.of(), holders(k), "still held after release");
            LeaseLostException e = assertThrows(LeaseLostException.class, l::check);
            assertTrue(e.released());
            assertTrue(l.lost().isDone() && l.lost().join().released());
            assertTrue(l.release(), "a second release gives the first's answer");
        }
        Lease l2 = acquire(k, Dlock.options());
        assertTrue(l2.token() > first, "tokens only grow: " + l2.token() + " after " + first);
    }

    @Test
    void notAcquiredWithinWait() throws SQLException {
        String k = key("w");
        acquire(k, Dlock.options());
        long t0 = System.nanoTime();
        assertThrows(NotAcquiredException.class,
                () -> acquire(k, Dlock.options().waitFor(Duration.ofMillis(700)).holder("waiter")));
        long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertTrue(waited >= 600, "waited " + waited + " ms, not the 700 ms wait");
        assertEquals(0, count("SELECT count(*) FROM dlock_waiters WHERE key = ?", k), "still queued");
        assertFalse(holders(k).containsKey("waiter"));
        // the key and holder are free again for this process
        assertThrows(NotAcquiredException.class, () -> acquire(k, Dlock.options().holder("waiter")));
    }

    @Test
    void holderInUse() {
        String k = key("h");
        Lease l = acquire(k, Dlock.options().holder("me"));
        assertThrows(HolderInUseException.class, () -> acquire(k, Dlock.options().holder("me")));
        l.release();
        Lease l2 = acquire(k, Dlock.options().holder("me"));
        assertTrue(l2.release());
    }

    @Test
    void renewalKeepsLease() throws Exception {
        String k = key("r");
        Lease l = acquire(k, Dlock.options().ttl(Duration.ofMillis(900)));
        Thread.sleep(2500);
        l.check();
        assertFalse(l.lost().isDone());
        assertEquals(l.token(), holders(k).get(l.holder()), "not held after 2.5 ttls");
    }

    @Test
    void forceReleaseIsLoss() throws Exception {
        String k = key("f");
        Lease l = acquire(k, Dlock.options().ttl(Duration.ofMillis(1500)));
        sql("SELECT dlock_force_release(?)", k);
        LeaseLostException e = lostWithin(l, 30);
        assertFalse(e.released());
        assertTrue(e.reason().contains("refused"), e.reason());
        LeaseLostException c = assertThrows(LeaseLostException.class, l::check);
        assertEquals(e.reason(), c.reason());
        assertFalse(l.release(), "release of a lost lease");
    }

    @Test
    void fencedExecute() throws Exception {
        String k = key("x");
        String tbl = "java_fenced";
        sql("DROP TABLE IF EXISTS " + tbl);
        sql("CREATE TABLE " + tbl + " (id int PRIMARY KEY, tok bigint)");
        sql("INSERT INTO " + tbl + " VALUES (1, 0)");
        Lease l = acquire(k, Dlock.options().ttl(Duration.ofSeconds(30)));
        try (Connection c = ds.getConnection()) {
            c.setAutoCommit(false);
            assertEquals(1, l.execute(c, "UPDATE " + tbl + " SET tok = ? WHERE id = 1", l.token()));
            // the fence holds: a force-release waits for the transaction
            CompletableFuture<Void> forced = CompletableFuture.runAsync(() -> {
                try {
                    sql("SELECT dlock_force_release(?)", k);
                } catch (SQLException e) {
                    throw new IllegalStateException(e);
                }
            });
            assertThrows(TimeoutException.class, () -> forced.get(1500, TimeUnit.MILLISECONDS),
                    "the force-release went through the fence");
            c.commit();
            forced.get(30, TimeUnit.SECONDS);
            // now the fence says no and nothing is written (autocommit: execute makes the transaction)
            c.setAutoCommit(true);
            assertThrows(LeaseLostException.class,
                    () -> l.execute(c, "UPDATE " + tbl + " SET tok = -1 WHERE id = 1"));
            assertTrue(c.getAutoCommit());
        }
        assertThrows(LeaseLostException.class, l::check);
        assertEquals(l.token(), count("SELECT tok FROM " + tbl + " WHERE id = ?::int", "1"), "written after the loss");
        sql("DROP TABLE " + tbl);
    }

    @Test
    void acquireAll() throws Exception {
        String k1 = key("m1");
        String k2 = key("m2");
        String k3 = key("m3");
        Lease one = acquire(k2, Dlock.options());
        assertThrows(NotAcquiredException.class,
                () -> held(Dlock.acquireAll(ds, List.of(k1, k2, k3), Duration.ofSeconds(5), Duration.ZERO)));
        assertEquals(0, holders(k1).size() + holders(k3).size(), "acquireAll left keys held");
        one.release();
        Lease all = held(Dlock.acquireAll(ds, List.of(k1, k2, k3, k1), Dlock.options().ttl(Duration.ofMillis(900))));
        assertEquals(List.of(k1, k2, k3), all.keys());
        Map<String, Long> toks = all.tokens();
        assertEquals(3, toks.size());
        assertEquals(toks.get(k1), all.token());
        Thread.sleep(2000);
        for (String k : List.of(k1, k2, k3)) {
            assertEquals(toks.get(k), holders(k).get(all.holder()), k + " not renewed with the others");
        }
        all.check();
        assertTrue(all.release());
        for (String k : List.of(k1, k2, k3)) {
            assertEquals(Map.of(), holders(k));
        }
    }

    @Test
    void slots() throws SQLException {
        String k = key("sem");
        Lease a = acquire(k, Dlock.options().slots(2));
        Lease b = acquire(k, Dlock.options().slots(2));
        assertNotEquals(a.token(), b.token());
        assertEquals(2, holders(k).size());
        assertThrows(NotAcquiredException.class, () -> acquire(k, Dlock.options().slots(2)));
        DatabaseException e = assertThrows(DatabaseException.class, () -> acquire(k, Dlock.options().slots(3)));
        assertEquals("22023", e.sqlState());
        a.release();
        acquire(k, Dlock.options().slots(2));
    }

    @Test
    void shared() throws SQLException {
        String k = key("shared");
        Lease r1 = acquire(k, Dlock.options().shared());
        Lease r2 = acquire(k, Dlock.options().shared());
        assertEquals(2, holders(k).size());
        assertNotEquals(r1.token(), r2.token());
        assertThrows(NotAcquiredException.class, () -> acquire(k, Dlock.options()));
        r1.release();
        r2.release();
        acquire(k, Dlock.options());
        assertThrows(NotAcquiredException.class, () -> acquire(k, Dlock.options().shared()));
    }

    @Test
    void databaseErrorCarriesSqlState() {
        DatabaseException e = assertThrows(DatabaseException.class,
                () -> acquire(key("e"), Dlock.options().ttl(Duration.ofDays(31))));
        assertEquals("22023", e.sqlState());
        assertTrue(e.getCause() instanceof SQLException);
        assertThrows(IllegalArgumentException.class, () -> acquire(key("e"), Dlock.options().ttl(Duration.ZERO)));
        // the key and holder were freed by the failed acquire
        Lease l = acquire(key("e2"), Dlock.options().holder("h"));
        assertTrue(l.release());
    }

    /** dlock_guard (issue 40): execute's write passes the guard; a plain write is refused with LK001. */
    @Test
    void fencedExecutePassesAGuard() throws SQLException {
        String k = key("guard");
        String tbl = "guarded_java_" + System.nanoTime();
        sql("CREATE TABLE " + tbl + " (id int PRIMARY KEY, v text)");
        try {
            sql("INSERT INTO " + tbl + " VALUES (1, 'before')");
            sql("SELECT dlock_guard(?::regclass, ?)", tbl, "$k$" + k + "$k$");
            SQLException e = assertThrows(SQLException.class, () -> sql("UPDATE " + tbl + " SET v = 'unfenced' WHERE id = 1"));
            assertEquals("LK001", e.getSQLState());
            Lease l = acquire(k, Dlock.options().ttl(Duration.ofSeconds(30)));
            try (Connection c = ds.getConnection()) {
                assertEquals(1, l.execute(c, "UPDATE " + tbl + " SET v = 'fenced' WHERE id = 1"));
            }
            try (Connection c = ds.getConnection(); Statement st = c.createStatement();
                    ResultSet rs = st.executeQuery("SELECT v FROM " + tbl)) {
                assertTrue(rs.next());
                assertEquals("fenced", rs.getString(1));
            }
        } finally {
            sql("DROP TABLE " + tbl);
        }
    }

    /**
     * No server: a DatabaseException without SQLSTATE; no answer in time
     * (dlock's lease table locked by an open transaction): a
     * CallTimeoutException, after the acquire's deadline (max(ttl, 5 s) past its
     * wait, for each of its two tries).
     */
    @Test
    void noAnswerIsTimeout() throws SQLException {
        PGSimpleDataSource nobody = new PGSimpleDataSource();
        nobody.setServerNames(new String[] {"127.0.0.1"});
        nobody.setPortNumbers(new int[] {1});
        nobody.setUser("postgres");
        DatabaseException refused = assertThrows(DatabaseException.class,
                () -> held(Dlock.acquire(nobody, key("nobody"), Dlock.options().ttl(Duration.ofSeconds(1)))));
        assertFalse(refused instanceof CallTimeoutException);
        assertNull(refused.sqlState());
        try (Connection locker = ds.getConnection()) {
            locker.setAutoCommit(false);
            try (Statement st = locker.createStatement()) {
                st.execute("LOCK TABLE dlock.lease IN ACCESS EXCLUSIVE MODE");
            }
            long start = System.nanoTime();
            CallTimeoutException e = assertThrows(CallTimeoutException.class,
                    () -> acquire(key("timeout"), Dlock.options().ttl(Duration.ofSeconds(1))));
            assertNull(e.sqlState());
            assertTrue(System.nanoTime() - start >= TimeUnit.SECONDS.toNanos(5), "given up before the deadline");
            locker.rollback();
        }
    }

    private static void pgctl(String verb) throws IOException, InterruptedException {
        String cmd = System.getenv("DLOCK_TEST_PGCTL");
        assertNotNull(cmd, "DLOCK_TEST_PGCTL is not set (scripts/test-clients.sh sets it)");
        Process p = new ProcessBuilder(cmd, verb).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.waitFor(), cmd + " " + verb + ": " + out);
    }

    /** A restart shorter than the ttl is not a loss; a server stopped past the ttl is. */
    @Test
    void serverStoppedPastTtl() throws Exception {
        Lease shortStop = acquire(key("restart"), Dlock.options().ttl(Duration.ofSeconds(8)));
        pgctl("stop");
        pgctl("start");
        Thread.sleep(3000); // a renewal (every ttl/3) after the restart
        shortStop.check();
        assertFalse(shortStop.lost().isDone());
        Lease l = acquire(key("stop"), Dlock.options().ttl(Duration.ofSeconds(2)));
        pgctl("stop");
        LeaseLostException e;
        try {
            e = lostWithin(l, 10);
        } finally {
            pgctl("start");
        }
        assertTrue(e.reason().contains("within the ttl"), e.reason());
        assertThrows(LeaseLostException.class, l::check);
        try (Connection c = ds.getConnection(); Statement s = c.createStatement()) {
            s.execute("SELECT 1");
        }
    }
}
