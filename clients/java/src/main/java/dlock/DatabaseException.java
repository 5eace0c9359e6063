package dlock;

import java.sql.SQLException;

/**
 * A dlock call failed: {@link #sqlState()} is the server's SQLSTATE
 * ({@code 22023} invalid argument, {@code 42501} privilege, {@code 25006}
 * read-only server, {@code 42883} the extension is not installed), or null
 * when no server answered (the connection could not be made or broke). The
 * cause is the driver's {@link SQLException}.
 */
public class DatabaseException extends DlockException {
    private static final long serialVersionUID = 1L;

    /** The server's SQLSTATE, or null. */
    private final String sqlState;

    /**
     * Wraps the driver's error.
     *
     * @param cause the driver's error
     */
    public DatabaseException(SQLException cause) {
        super(message(cause), cause);
        this.sqlState = serverState(cause);
    }

    /**
     * An error with its own message and SQLSTATE (for {@link CallTimeoutException}).
     *
     * @param message the message
     * @param cause the driver's error
     * @param sqlState the SQLSTATE, or null
     */
    protected DatabaseException(String message, SQLException cause, String sqlState) {
        super(message, cause);
        this.sqlState = sqlState;
    }

    private static String message(SQLException e) {
        String s = serverState(e);
        return s == null ? "dlock: " + e.getMessage() : "dlock: " + e.getMessage() + " (SQLSTATE " + s + ")";
    }

    /**
     * The SQLSTATE of an error the server sent; null for one that no server
     * sent (class 08, connection exception, is the driver's own when the
     * connection could not be made or broke).
     */
    static String serverState(SQLException e) {
        String s = e.getSQLState();
        if (s == null || s.isEmpty() || s.startsWith("08")) {
            return null;
        }
        return s;
    }

    /**
     * The server's SQLSTATE, or null when no server answered.
     *
     * @return the five-character SQLSTATE, or null
     */
    public String sqlState() {
        return sqlState;
    }
}
