package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/run"
)

// What a failed run leaves for the next person: the server's store, whose
// streams they can read with a nats-server started on a copy of it, and for each
// chaos-keyed run with no outcome what KV runs held of it and of its key's slot
// when the run ended.

// keptLost is at most how many lost chaos-keyed runs have their records shown.
const keptLost = 20

// lostKeyedRecords reads, while the fleet is up, the records of chaos-keyed's
// runs that have no outcome: each one's waiting record (its gate, when it was set
// aside; not its job), claim and cancel, and its key's slot.
func (r *runner) lostKeyedRecords(ctx context.Context, out Outcomes) []string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	kv, err := r.b.KV(ctx, r.b.BucketRuns())
	if err != nil {
		return []string{"KV runs: " + err.Error()}
	}
	var lines []string
	shown := 0
	for _, t := range r.keyed {
		if len(out[t.Execution]) > 0 {
			continue
		}
		if shown++; shown > keptLost {
			lines = append(lines, fmt.Sprintf("(records of more lost %s runs left out)", keyedSkill))
			break
		}
		gate := events.ConcGate(keyedSkill, 0, events.KeyHash(t.Key))
		lines = append(lines, fmt.Sprintf("lost %s run: trigger %s, key %s, execution %s", keyedSkill, t.ID, t.Key, t.Execution))
		for _, key := range []string{events.RunHeldKey(t.Execution), events.RunClaimKey(t.Execution), events.RunCancelKey(t.Execution), events.ConcSlotKey(gate, 0)} {
			lines = append(lines, "  "+key+": "+describe(ctx, kv, key))
		}
	}
	return lines
}

// describe is one KV runs record, for a person.
func describe(ctx context.Context, kv jetstream.KeyValue, key string) string {
	e, err := kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return "none"
	case errors.Is(err, jetstream.ErrKeyDeleted):
		return "deleted"
	case err != nil:
		return "unreadable: " + err.Error()
	}
	at := fmt.Sprintf("revision %d, written %s", e.Revision(), e.Created().UTC().Format(time.RFC3339Nano))
	if _, ok := events.HeldExecution(key); ok {
		var h run.Held
		if err := json.Unmarshal(e.Value(), &h); err != nil {
			return at + ", unreadable: " + err.Error()
		}
		s := fmt.Sprintf("%s, set aside %s, gate %q (limit %d)", at, h.At.Format(time.RFC3339Nano), h.Gate, h.Limit)
		if !h.Until.IsZero() {
			s += ", until " + h.Until.Format(time.RFC3339Nano)
		}
		return s
	}
	return at + ": " + string(e.Value())
}

// keepStore copies the server's store out of its tmpfs, which is unmounted at
// the end, into the run's directory, once the server has stopped; it returns
// where the store is. A store not on a tmpfs stays where it is.
func (r *runner) keepStore() (string, error) {
	store := filepath.Join(r.dir, "nats")
	if !r.mounted {
		return store, nil
	}
	kept := filepath.Join(r.dir, "store")
	if err := os.CopyFS(kept, os.DirFS(store)); err != nil {
		return "", fmt.Errorf("chaos: keep the store: %w", err)
	}
	return kept, nil
}
