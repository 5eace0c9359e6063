package dlock;

import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.util.HashMap;
import java.util.Map;
import org.postgresql.ds.PGSimpleDataSource;

/** The test server of scripts/test-clients.sh, as a DataSource. */
final class TestDb {
    private TestDb() {}

    /**
     * A DataSource of DLOCK_TEST_DSN (libpq keywords: host, port, user,
     * dbname) as a superuser.
     */
    static PGSimpleDataSource dataSource() {
        String dsn = System.getenv("DLOCK_TEST_DSN");
        assertNotNull(dsn, "DLOCK_TEST_DSN is not set (scripts/test-clients.sh sets it)");
        Map<String, String> kw = new HashMap<>();
        for (String part : dsn.trim().split("\\s+")) {
            int eq = part.indexOf('=');
            kw.put(part.substring(0, eq), part.substring(eq + 1));
        }
        PGSimpleDataSource ds = new PGSimpleDataSource();
        ds.setServerNames(new String[] {kw.getOrDefault("host", "127.0.0.1")});
        ds.setPortNumbers(new int[] {Integer.parseInt(kw.getOrDefault("port", "5432"))});
        ds.setUser(kw.getOrDefault("user", "postgres"));
        ds.setDatabaseName(kw.getOrDefault("dbname", "postgres"));
        ds.setApplicationName("dlock-java-test");
        return ds;
    }
}
