package dlock;

import java.time.Duration;

/**
 * How the claim loop ({@link Dlock#claims}) claims rows: how many at a time,
 * their ttl, which rows and in what order, how often an idle loop looks
 * again, and whether it ends when no row is to be had. A builder: each
 * setter returns this.
 */
public final class ClaimOptions {
    int n = 10;
    Duration ttl = Duration.ofSeconds(30);
    String filter;
    String orderBy;
    Integer maxAttempts;
    Duration poll = Duration.ofSeconds(1);
    boolean untilEmpty;
    Duration retryAfter;
    Duration wait;
    Duration backoff;
    Duration backoffMax;
    String groupBy;
    Integer perGroup;
    boolean fair;

    /** The defaults: 10 rows a batch, ttl 30 s, every row, poll every second, never ending. */
    public ClaimOptions() {
    }

    /**
     * At most how many rows a batch claims (default 10).
     *
     * @param n at least 1
     * @return this
     */
    public ClaimOptions n(int n) {
        this.n = n;
        return this;
    }

    /**
     * How long a batch's claims last unless renewed (default 30 s; renewed
     * every ttl/3 while the batch is worked on).
     *
     * @param ttl the time to live, at least 1 ms
     * @return this
     */
    public ClaimOptions ttl(Duration ttl) {
        this.ttl = ttl;
        return this;
    }

    /**
     * Only the rows matching this SQL condition over the table's columns
     * ({@code dlock_claim}'s filter), e.g. {@code "status = 0"}.
     *
     * @param filter an SQL condition, or null for every row
     * @return this
     */
    public ClaimOptions filter(String filter) {
        this.filter = filter;
        return this;
    }

    /**
     * The order in which rows are claimed ({@code dlock_claim}'s order_by),
     * e.g. {@code "created_at, id"}.
     *
     * @param orderBy an SQL ORDER BY list, or null
     * @return this
     */
    public ClaimOptions orderBy(String orderBy) {
        this.orderBy = orderBy;
        return this;
    }

    /**
     * Rows claimed this many times already are not claimed again
     * ({@code dlock_claim}'s max_attempts).
     *
     * @param maxAttempts at least 1, or null for no limit
     * @return this
     */
    public ClaimOptions maxAttempts(Integer maxAttempts) {
        this.maxAttempts = maxAttempts;
        return this;
    }

    /**
     * How long an idle loop waits before it looks again (default 1 s).
     *
     * @param poll the pause
     * @return this
     */
    public ClaimOptions poll(Duration poll) {
        this.poll = poll;
        return this;
    }

    /**
     * Ends the loop when no row is to be had, instead of polling.
     *
     * @return this
     */
    public ClaimOptions untilEmpty() {
        this.untilEmpty = true;
        return this;
    }

    /**
     * How long a row given back as failed ({@link Batch#fail}) stays
     * unclaimable (default null: the claim's backoff).
     *
     * @param retryAfter the pause, or null
     * @return this
     */
    public ClaimOptions retryAfter(Duration retryAfter) {
        this.retryAfter = retryAfter;
        return this;
    }

    /**
     * How long one {@code dlock_claim} call waits in the server for rows
     * (woken by a commit that may bring some) before the loop looks again
     * (default null: no waiting in the server, poll instead).
     *
     * @param wait the wait, or null
     * @return this
     */
    public ClaimOptions wait(Duration wait) {
        this.wait = wait;
        return this;
    }

    /**
     * A row given back as failed is not claimable again before
     * backoff * 2^(attempts - 1) ({@code dlock_claim}'s backoff).
     *
     * @param backoff the first delay, or null for none
     * @return this
     */
    public ClaimOptions backoff(Duration backoff) {
        this.backoff = backoff;
        return this;
    }

    /**
     * The longest delay of {@link #backoff}.
     *
     * @param backoffMax the cap, or null for the server's
     * @return this
     */
    public ClaimOptions backoffMax(Duration backoffMax) {
        this.backoffMax = backoffMax;
        return this;
    }

    /**
     * Groups the rows by this SQL expression over the table's columns, for
     * {@link #perGroup} and {@link #fair}.
     *
     * @param groupBy an SQL expression, or null
     * @return this
     */
    public ClaimOptions groupBy(String groupBy) {
        this.groupBy = groupBy;
        return this;
    }

    /**
     * At most this many live claims in one group (with {@link #groupBy}).
     *
     * @param perGroup at least 1, or null for no limit
     * @return this
     */
    public ClaimOptions perGroup(Integer perGroup) {
        this.perGroup = perGroup;
        return this;
    }

    /**
     * Takes the groups in turn (with {@link #groupBy}).
     *
     * @return this
     */
    public ClaimOptions fair() {
        this.fair = true;
        return this;
    }

    /** Checks the options; a copy. */
    ClaimOptions checked() {
        if (n < 1) {
            throw new IllegalArgumentException("dlock: n must be at least 1, not " + n);
        }
        if (ttl == null || ttl.compareTo(Duration.ofMillis(1)) < 0) {
            throw new IllegalArgumentException("dlock: ttl must be at least 1 ms, not " + ttl);
        }
        if (poll == null || poll.isNegative()) {
            throw new IllegalArgumentException("dlock: poll must not be negative, not " + poll);
        }
        if (wait != null && wait.isNegative()) {
            throw new IllegalArgumentException("dlock: wait must not be negative, not " + wait);
        }
        if (perGroup != null && perGroup < 1) {
            throw new IllegalArgumentException("dlock: perGroup must be at least 1, not " + perGroup);
        }
        if ((perGroup != null || fair) && groupBy == null) {
            throw new IllegalArgumentException("dlock: perGroup and fair need groupBy");
        }
        if (maxAttempts != null && maxAttempts < 1) {
            throw new IllegalArgumentException("dlock: maxAttempts must be at least 1, not " + maxAttempts);
        }
        if (retryAfter != null && retryAfter.isNegative()) {
            throw new IllegalArgumentException("dlock: retryAfter must not be negative, not " + retryAfter);
        }
        ClaimOptions o = new ClaimOptions();
        o.n = n;
        o.ttl = ttl;
        o.filter = filter;
        o.orderBy = orderBy;
        o.maxAttempts = maxAttempts;
        o.poll = poll;
        o.untilEmpty = untilEmpty;
        o.retryAfter = retryAfter;
        o.wait = wait;
        o.backoff = backoff;
        o.backoffMax = backoffMax;
        o.groupBy = groupBy;
        o.perGroup = perGroup;
        o.fair = fair;
        return o;
    }
}
