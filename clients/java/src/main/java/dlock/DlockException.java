package dlock;

/**
 * The base of every error of this client: catch it to catch them all.
 * Unchecked, as a lock that was not had or was lost is an outcome of the
 * work, not of the code's types. The kinds are {@link NotAcquiredException},
 * {@link LeaseLostException}, {@link HolderInUseException} and
 * {@link DatabaseException}; a bad argument is an
 * {@link IllegalArgumentException}.
 */
public class DlockException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /**
     * An error with a message.
     *
     * @param message what happened
     */
    public DlockException(String message) {
        super(message);
    }

    /**
     * An error with a message and its cause.
     *
     * @param message what happened
     * @param cause the error that caused it (the driver's)
     */
    public DlockException(String message, Throwable cause) {
        super(message, cause);
    }
}
