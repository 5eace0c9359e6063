package dlock;

import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * One lease per key and holder in a process: the server gives a second
 * acquire by the same holder the same token, so two leases would each
 * believe they hold the key alone. A key and holder are taken from the start
 * of a lease's acquire until its release has been answered (a lost lease
 * too, until its release).
 */
final class Holders {
    private static final Set<List<String>> IN_USE = new HashSet<>();

    private Holders() {
    }

    static synchronized void takeKeys(List<String> keys, String holder) {
        for (String k : keys) {
            if (IN_USE.contains(List.of(k, holder))) {
                throw new HolderInUseException("dlock: holder in use: key \"" + k + "\" with holder \"" + holder
                        + "\" is another lease's of this process until its release");
            }
        }
        for (String k : keys) {
            IN_USE.add(List.of(k, holder));
        }
    }

    static synchronized void freeKeys(List<String> keys, String holder) {
        for (String k : keys) {
            IN_USE.remove(List.of(k, holder));
        }
    }
}
