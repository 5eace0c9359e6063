package dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.TestInfo;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * The claim loop against a real server (DLOCK_TEST_DSN, as LeaseTest): a
 * table of jobs per test, claimed, completed, renewed, lost and given back.
 */
class ClaimsTest {
    private static PGSimpleDataSource ds;
    private String table;

    @BeforeAll
    static void dataSource() {
        ds = TestDb.dataSource();
    }

    /** A table of this test alone, with rows 1 to 25 to do (status 0). */
    @BeforeEach
    void jobs(TestInfo info) throws SQLException {
        table = "java_jobs_" + info.getTestMethod().map(m -> m.getName()).orElse("t").toLowerCase();
        sql("DROP TABLE IF EXISTS " + table);
        sql("CREATE TABLE " + table + " (id int PRIMARY KEY, status int NOT NULL DEFAULT 0)");
        sql("INSERT INTO " + table + " SELECT g FROM generate_series(1, 25) g");
    }

    private static void sql(String sql, Object... args) throws SQLException {
        try (Connection c = ds.getConnection(); PreparedStatement ps = c.prepareStatement(sql)) {
            for (int i = 0; i < args.length; i++) {
                ps.setObject(i + 1, args[i]);
            }
            ps.execute();
        }
    }

    private long value(String sql, Object... args) throws SQLException {
        try (Connection c = ds.getConnection(); PreparedStatement ps = c.prepareStatement(sql)) {
            for (int i = 0; i < args.length; i++) {
                ps.setObject(i + 1, args[i]);
            }
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }

    private long liveClaims(String holder) throws SQLException {
        return value("SELECT count(*) FROM dlock_claims WHERE table_name = ?::regclass AND holder = ?", table, holder);
    }

    @Test
    void claimsCompleteUntilEmpty() throws SQLException {
        List<Object> done = new ArrayList<>();
        int batches = 0;
        try (Claims loop = Dlock.claims(ds, table, "worker-1",
                Dlock.claimOptions().n(10).filter("status = 0").orderBy("id").untilEmpty());
                Connection conn = ds.getConnection()) {
            for (Batch batch : loop) {
                batches++;
                assertEquals(batch.keys().size(), batch.rows().size());
                assertEquals(batch.keys().get(0), batch.rows().get(0).get("id"));
                conn.setAutoCommit(false);
                List<Object> mine = batch.complete(batch.keys(), conn);
                Array ids = conn.createArrayOf("integer", mine.toArray());
                try (PreparedStatement ps = conn.prepareStatement(
                        "UPDATE " + table + " SET status = 1 WHERE id = ANY(?)")) {
                    ps.setArray(1, ids);
                    assertEquals(mine.size(), ps.executeUpdate());
                }
                conn.commit();
                assertEquals(List.of(), batch.outstanding());
                done.addAll(mine);
            }
        }
        assertEquals(3, batches);
        assertEquals(25, done.size());
        assertEquals(25, value("SELECT count(*) FROM " + table + " WHERE status = 1"));
        assertEquals(0, liveClaims("worker-1"));
    }

    @Test
    void claimsRenewedAndGivenBack() throws Exception {
        Batch batch;
        try (Claims loop = Dlock.claims(ds, table, "worker-2",
                Dlock.claimOptions().n(2).ttl(Duration.ofMillis(900)).orderBy("id"))) {
            batch = loop.next();
            assertEquals(List.of(1, 2), batch.keys());
            Thread.sleep(2500);
            batch.check();
            assertEquals(2, liveClaims("worker-2"), "claims not renewed past their ttl");
            assertEquals(1, batch.unclaim(List.of(2), null));
            assertEquals(List.of(1), batch.outstanding());
            Thread.sleep(1500);
            batch.check(); // one claim left, renewed
        }
        assertEquals(0, liveClaims("worker-2"), "the loop's close did not give the batch back");
        assertTrue(batch.lost().get(1, TimeUnit.SECONDS).released());
        assertThrows(LeaseLostException.class, batch::check);
    }

    @Test
    void claimsLost() throws Exception {
        try (Claims loop = Dlock.claims(ds, table, "worker-3", Dlock.claimOptions().n(3).ttl(Duration.ofMillis(1500)))) {
            Batch batch = loop.next();
            batch.check();
            sql("SELECT dlock_unclaim(?::regclass, ?)", table, "worker-3"); // behind its back
            LeaseLostException e = batch.lost().get(30, TimeUnit.SECONDS);
            assertFalse(e.released());
            assertEquals(Batch.FEWER, e.reason());
            assertThrows(LeaseLostException.class, batch::check);
        }
    }

    @Test
    void claimsFailedNotClaimedAgain() throws SQLException {
        try (Claims loop = Dlock.claims(ds, table, "worker-4",
                Dlock.claimOptions().n(25).untilEmpty().retryAfter(Duration.ofHours(1)))) {
            Batch batch = loop.next();
            assertEquals(25, batch.keys().size());
            assertEquals(25, batch.fail(batch.keys(), null, null));
            assertNull(loop.next(), "rows given back as failed were claimed again");
        }
    }

    /** A loop with wait waits in the server for a row inserted meanwhile. */
    @Timeout(60) // without the wait, it would poll in an hour
    @Test
    void claimsWaitInTheServer() throws Exception {
        sql("DELETE FROM " + table);
        try (Claims loop = Dlock.claims(ds, table, "worker-5",
                Dlock.claimOptions().n(5).wait(Duration.ofSeconds(20)).poll(Duration.ofHours(1)))) {
            new Thread(() -> {
                try {
                    Thread.sleep(300);
                    sql("INSERT INTO " + table + " VALUES (77)");
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            }).start();
            long waits = value("SELECT claim_waits FROM dlock_stats()");
            long start = System.nanoTime();
            Batch batch = loop.next();
            assertEquals(List.of(77), batch.keys());
            assertTrue(value("SELECT claim_waits FROM dlock_stats()") > waits, "the claim did not wait in the server");
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(15), "not woken within the wait");
        }
    }

    /** groupBy with perGroup: at most that many live claims per group. */
    @Test
    void claimsPerGroup() throws SQLException {
        try (Claims loop = Dlock.claims(ds, table, "worker-6",
                Dlock.claimOptions().n(10).groupBy("id % 3").perGroup(1).orderBy("id"))) {
            Batch batch = loop.next();
            assertEquals(List.of(1, 2, 3), batch.keys());
        }
        assertThrows(IllegalArgumentException.class,
                () -> Dlock.claims(ds, table, "worker-7", Dlock.claimOptions().perGroup(1)));
    }

}
