package dlock

import (
	"encoding/json"
	"fmt"
)

// target is what a lease holds: one key (a lease, one of slots places, or
// a shared lease) or several keys, all or none.  Every statement takes the
// keys and tokens as JSON, so that no driver needs to encode arrays; the
// renewal, release and fence of several keys are one statement each, whose
// bool_and reads every row (each key is renewed, released or fenced).
type target struct {
	keys   []string
	slots  int
	shared bool
	multi  bool
}

const micros = "::bigint * interval '1 microsecond'"

func (t target) acquireSQL() string {
	switch {
	case t.multi:
		return "SELECT array_to_json(dlock_acquire_all(ARRAY(SELECT json_array_elements_text($1::json)), $2, $3" +
			micros + ", $4" + micros + "))::text"
	case t.shared:
		return "SELECT json_build_array(dlock_acquire_shared($1::json->>0, $2, $3" + micros + ", $4" + micros + "))::text"
	case t.slots > 0:
		return fmt.Sprintf("SELECT json_build_array(dlock_acquire($1::json->>0, $2, $3%s, $4%s, %d))::text",
			micros, micros, t.slots)
	default:
		return "SELECT json_build_array(dlock_acquire($1::json->>0, $2, $3" + micros + ", $4" + micros + "))::text"
	}
}

const (
	renewSQL = "SELECT bool_and(dlock_renew(k.key, $1, $2" + micros +
		", k.token)) FROM json_to_recordset($3::json) AS k(key text, token bigint)"
	releaseSQL = "SELECT bool_and(dlock_release(k.key, $1, k.token))" +
		" FROM json_to_recordset($2::json) AS k(key text, token bigint)"
	// an acquire whose answer never came: release by holder, whatever token
	forgetSQL = "SELECT bool_and(dlock_release(k, $1))" +
		" FROM json_array_elements_text($2::json) AS k"
	validateSQL = "SELECT bool_and(dlock_validate(k.key, $1, k.token))" +
		" FROM json_to_recordset($2::json) AS k(key text, token bigint)"
)

type keyToken struct {
	Key   string `json:"key"`
	Token int64  `json:"token"`
}

func (t target) keysJSON() string {
	b, _ := json.Marshal(t.keys)
	return string(b)
}

func (t target) tokensJSON(tokens []int64) string {
	kt := make([]keyToken, len(t.keys))
	for i, k := range t.keys {
		kt[i] = keyToken{k, tokens[i]}
	}
	b, _ := json.Marshal(kt)
	return string(b)
}

// tokens reads an acquire's answer: nil when not acquired.
func (t target) tokens(answer string) ([]int64, error) {
	var raw []*int64
	if answer == "" || answer == "null" {
		return nil, nil
	}
	if err := json.Unmarshal([]byte(answer), &raw); err != nil {
		return nil, fmt.Errorf("dlock: the server's answer %q: %w", answer, err)
	}
	out := make([]int64, len(raw))
	for i, v := range raw {
		if v == nil {
			return nil, nil
		}
		out[i] = *v
	}
	if len(out) != len(t.keys) {
		return nil, fmt.Errorf("dlock: %d tokens for %d keys", len(out), len(t.keys))
	}
	return out, nil
}
