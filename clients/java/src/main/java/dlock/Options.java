package dlock;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.HexFormat;

/**
 * How to acquire a lease: its ttl, how long to wait, the holder's name and
 * its shape (one of n places of a counting semaphore, or a shared lease).
 * A builder: each setter returns this.
 *
 * <pre>{@code
 * Dlock.acquire(ds, "reports", Dlock.options().ttl(Duration.ofSeconds(30)).slots(3))
 * }</pre>
 */
public final class Options {
    private static final SecureRandom RANDOM = new SecureRandom();

    Duration ttl = Duration.ofSeconds(30);
    Duration wait = Duration.ZERO;
    String holder;
    int slots;
    boolean shared;

    /** The defaults: ttl 30 s, no waiting, a holder unique to the lease. */
    public Options() {
    }

    /**
     * How long the lease lasts unless renewed (default 30 s; at least 1 ms,
     * the server's precision is a microsecond).
     *
     * @param ttl the time to live
     * @return this
     */
    public Options ttl(Duration ttl) {
        this.ttl = ttl;
        return this;
    }

    /**
     * How long the acquire waits in the key's FIFO queue (default zero: not
     * at all).
     *
     * @param wait the longest wait
     * @return this
     */
    public Options waitFor(Duration wait) {
        this.wait = wait;
        return this;
    }

    /**
     * Names the holder (default {@code HOST:PID:RANDOM}, unique to the
     * lease).
     *
     * @param holder the holder's name
     * @return this
     */
    public Options holder(String holder) {
        this.holder = holder;
        return this;
    }

    /**
     * Makes the lease one of n places of the counting semaphore key
     * ({@code dlock_acquire(key, holder, ttl, wait, slots)}); every holder
     * names the same n.
     *
     * @param n the number of places, at least 1
     * @return this
     */
    public Options slots(int n) {
        this.slots = n;
        return this;
    }

    /**
     * Makes the lease a shared one ({@code dlock_acquire_shared}): any
     * number of shared holders at once, or the one holder of a lease.
     *
     * @return this
     */
    public Options shared() {
        this.shared = true;
        return this;
    }

    /** Checks the options and fills in the holder; a copy. */
    Options checked() {
        if (ttl == null || ttl.compareTo(Duration.ofMillis(1)) < 0) {
            throw new IllegalArgumentException("dlock: ttl must be at least 1 ms, not " + ttl);
        }
        if (wait == null || wait.isNegative()) {
            throw new IllegalArgumentException("dlock: wait must not be negative, not " + wait);
        }
        if (slots < 0) {
            throw new IllegalArgumentException("dlock: slots must be at least 1, not " + slots);
        }
        if (slots > 0 && shared) {
            throw new IllegalArgumentException("dlock: a lease is either one of slots places or shared, not both");
        }
        Options o = new Options();
        o.ttl = ttl;
        o.wait = wait;
        o.holder = holder == null || holder.isEmpty() ? defaultHolder() : holder;
        o.slots = slots;
        o.shared = shared;
        return o;
    }

    /** HOST:PID:RANDOM, unique to one lease. */
    static String defaultHolder() {
        String host;
        try {
            host = InetAddress.getLocalHost().getHostName();
        } catch (UnknownHostException e) {
            host = "localhost";
        }
        long pid = ProcessHandle.current().pid();
        byte[] b = new byte[4];
        RANDOM.nextBytes(b);
        return host + ":" + pid + ":" + HexFormat.of().formatHex(b);
    }
}
