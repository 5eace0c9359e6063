package dlock;

/**
 * Someone else kept the key (or one of the keys) for the whole wait: nothing
 * is held or queued for this acquire.
 */
public class NotAcquiredException extends DlockException {
    private static final long serialVersionUID = 1L;

    /**
     * The acquire was not granted.
     *
     * @param message which keys, and for how long it waited
     */
    public NotAcquiredException(String message) {
        super(message);
    }
}
