package dlock;

import java.util.ArrayList;
import java.util.List;

/**
 * What a lease holds: one key (a lease, one of slots places, or a shared
 * lease) or several keys, all or none. Every statement takes the keys and
 * tokens as JSON text, so that no driver needs to encode arrays; the
 * renewal, release and fence of several keys are one statement each, whose
 * bool_and reads every row (each key is renewed, released or fenced).
 */
final class Target {
    private static final String MICROS = "::bigint * interval '1 microsecond'";

    static final String RENEW_SQL = "SELECT bool_and(dlock_renew(k.key, ?, ?" + MICROS
            + ", k.token)) FROM json_to_recordset(?::json) AS k(key text, token bigint)";
    static final String RELEASE_SQL = "SELECT bool_and(dlock_release(k.key, ?, k.token))"
            + " FROM json_to_recordset(?::json) AS k(key text, token bigint)";
    /** An acquire whose answer never came: release by holder, whatever token. */
    static final String FORGET_SQL = "SELECT bool_and(dlock_release(k, ?))"
            + " FROM json_array_elements_text(?::json) AS k";
    static final String VALIDATE_SQL = "SELECT bool_and(dlock_validate(k.key, ?, k.token))"
            + " FROM json_to_recordset(?::json) AS k(key text, token bigint)";

    final List<String> keys;
    final int slots;
    final boolean shared;
    final boolean multi;

    Target(List<String> keys, int slots, boolean shared, boolean multi) {
        this.keys = List.copyOf(keys);
        this.slots = slots;
        this.shared = shared;
        this.multi = multi;
    }

    /** The acquire: parameters keys (JSON), holder, ttl and wait (microseconds). */
    String acquireSql() {
        if (multi) {
            return "SELECT array_to_json(dlock_acquire_all(ARRAY(SELECT json_array_elements_text(?::json)), ?, ?"
                    + MICROS + ", ?" + MICROS + "))::text";
        }
        if (shared) {
            return "SELECT json_build_array(dlock_acquire_shared(?::json->>0, ?, ?" + MICROS + ", ?" + MICROS
                    + "))::text";
        }
        if (slots > 0) {
            return "SELECT json_build_array(dlock_acquire(?::json->>0, ?, ?" + MICROS + ", ?" + MICROS + ", "
                    + slots + "))::text";
        }
        return "SELECT json_build_array(dlock_acquire(?::json->>0, ?, ?" + MICROS + ", ?" + MICROS + "))::text";
    }

    String keysJson() {
        StringBuilder b = new StringBuilder("[");
        for (int i = 0; i < keys.size(); i++) {
            if (i > 0) {
                b.append(',');
            }
            quote(b, keys.get(i));
        }
        return b.append(']').toString();
    }

    String tokensJson(long[] tokens) {
        StringBuilder b = new StringBuilder("[");
        for (int i = 0; i < keys.size(); i++) {
            if (i > 0) {
                b.append(',');
            }
            b.append("{\"key\":");
            quote(b, keys.get(i));
            b.append(",\"token\":").append(tokens[i]).append('}');
        }
        return b.append(']').toString();
    }

    /** A JSON string. */
    private static void quote(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        b.append('"');
    }

    /**
     * Reads an acquire's answer, a JSON array of tokens: null when not
     * acquired (a null answer, or a null token).
     */
    long[] tokens(String answer) {
        if (answer == null || answer.equals("null")) {
            return null;
        }
        String s = answer.trim();
        if (!s.startsWith("[") || !s.endsWith("]")) {
            throw new DlockException("dlock: the server's answer \"" + answer + "\" is not an array of tokens");
        }
        List<Long> out = new ArrayList<>();
        String inner = s.substring(1, s.length() - 1).trim();
        if (!inner.isEmpty()) {
            for (String v : inner.split(",")) {
                v = v.trim();
                if (v.equals("null")) {
                    return null;
                }
                try {
                    out.add(Long.parseLong(v));
                } catch (NumberFormatException e) {
                    throw new DlockException("dlock: the server's answer \"" + answer + "\": " + e.getMessage(), e);
                }
            }
        }
        if (out.size() != keys.size()) {
            throw new DlockException("dlock: " + out.size() + " tokens for " + keys.size() + " keys");
        }
        long[] t = new long[out.size()];
        for (int i = 0; i < t.length; i++) {
            t[i] = out.get(i);
        }
        return t;
    }
}
