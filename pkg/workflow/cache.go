package workflow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Cache keeps tool results for steps with `cache: TTL`. The worker implements it over
// KV cache with a per-key TTL; MemStore is an in-memory one. Methods may be called
// from several goroutines at once. The cache is an optimisation: the engine logs a
// Get or Put error and goes on as if the key were absent.
type Cache interface {
	// Get returns the value stored under key and whether there was one still alive.
	Get(ctx context.Context, key string) (any, bool, error)
	// Put stores v under key for ttl.
	Put(ctx context.Context, key string, v any, ttl time.Duration) error
}

// CacheKey is the key under which a tool call's result is cached: "wf." followed by
// the hex SHA-256 of the JSON array [skill name, step id, tool name, rendered args]
// (encoding/json, so map keys are sorted and the encoding is canonical). The same
// step called with the same arguments hits; a change of any of the four misses.
// The key is valid in NATS KV. Arguments that JSON cannot encode give "", and the
// call is not cached.
func CacheKey(skillName, stepID, toolName string, args map[string]any) string {
	b, err := json.Marshal([]any{skillName, stepID, toolName, args})
	if err != nil {
		return "" // not JSON-like: not cacheable
	}
	sum := sha256.Sum256(b)
	return "wf." + hex.EncodeToString(sum[:])
}
