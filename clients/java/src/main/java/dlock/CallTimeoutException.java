package dlock;

import java.sql.SQLException;

/**
 * No answer in time: a {@link DatabaseException} without SQLSTATE whose
 * outcome is unknown (an acquire's is given back). Each try of an acquire
 * is given up {@code max(ttl, 5 s)} after what is left of its wait.
 */
public class CallTimeoutException extends DatabaseException {
    private static final long serialVersionUID = 1L;

    /**
     * The error of a call that got no answer in time.
     *
     * @param cause the driver's error (its statement cancelled)
     */
    public CallTimeoutException(SQLException cause) {
        super("dlock: no answer in time", cause, null);
    }
}
