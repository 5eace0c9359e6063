package dlock;

import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.atomic.AtomicInteger;

/** The timer threads of a lease or a claim loop: daemons, named after it. */
final class Timers {
    private static final AtomicInteger SERIAL = new AtomicInteger();

    private Timers() {
    }

    /**
     * Two daemon threads named PREFIX-N-M; cancelled tasks are removed, and
     * nothing runs after a shutdown.
     */
    static ScheduledThreadPoolExecutor daemons(String prefix) {
        String name = prefix + "-" + SERIAL.incrementAndGet();
        AtomicInteger n = new AtomicInteger();
        ScheduledThreadPoolExecutor timers = new ScheduledThreadPoolExecutor(2, r -> {
            Thread th = new Thread(r, name + "-" + n.incrementAndGet());
            th.setDaemon(true);
            return th;
        });
        timers.setRemoveOnCancelPolicy(true);
        timers.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
        timers.setContinueExistingPeriodicTasksAfterShutdownPolicy(false);
        return timers;
    }
}
