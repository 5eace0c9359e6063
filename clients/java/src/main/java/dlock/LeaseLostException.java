package dlock;

/**
 * The lease is lost (a renewal was refused, no renewal was confirmed within
 * the ttl, or a fence said no) or released: the work it protects must stop.
 * A claim loop's {@link Batch} throws it too, when its claims are lost.
 * {@link #reason()} says why; {@link #released()} tells a release apart.
 */
public class LeaseLostException extends DlockException {
    private static final long serialVersionUID = 1L;

    /** The reason of a lease ended by its own release. */
    static final String RELEASED = "released";

    /** The lease's key. */
    private final String key;
    /** Why it is lost. */
    private final String reason;

    /**
     * A lost lease.
     *
     * @param key the lease's key (the first, for several keys)
     * @param reason why it is lost
     */
    public LeaseLostException(String key, String reason) {
        this("lease on", key, reason);
    }

    /** A loss of what (a lease on, claims on) key. */
    LeaseLostException(String what, String key, String reason) {
        super("dlock: " + what + " \"" + key + "\" lost: " + reason);
        this.key = key;
        this.reason = reason;
    }

    /**
     * The lease's key (the first, for several keys), or the table of a
     * claim loop's batch.
     *
     * @return the key
     */
    public String key() {
        return key;
    }

    /**
     * Why the lease is lost: "the server refused the renewal (...)", "no
     * renewal was confirmed within the ttl", "the fence (dlock_validate) said
     * no", or "released".
     *
     * @return the reason
     */
    public String reason() {
        return reason;
    }

    /**
     * Whether the lease ended by its own release rather than a loss.
     *
     * @return true after {@link Lease#release()} or {@link Lease#close()}
     */
    public boolean released() {
        return RELEASED.equals(reason);
    }
}
