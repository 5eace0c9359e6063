package dlock;

/**
 * Another lease of this process has the key with this holder, from its
 * acquire until its release has been answered: the server would give the
 * second acquire the same token, and two leases would each believe they hold
 * the key alone.
 */
public class HolderInUseException extends DlockException {
    private static final long serialVersionUID = 1L;

    /**
     * The key and holder are another lease's.
     *
     * @param message which key and holder
     */
    public HolderInUseException(String message) {
        super(message);
    }
}
