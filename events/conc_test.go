package events

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// A gate's and a throttle's key hash is SHA-256 truncated to 128 bits, so a
// sender cannot choose a value that shares another value's slots or rate.
func TestKeyHashIsTruncatedSHA256(t *testing.T) {
	for _, v := range []string{"", "acme", "tenant-1", "émoji ✓"} {
		sum := sha256.Sum256([]byte(v))
		if got, want := KeyHash(v), hex.EncodeToString(sum[:16]); got != want {
			t.Errorf("KeyHash(%q) = %s, want %s", v, got, want)
		}
	}
	g := ConcGate("s", 2, KeyHash("acme"))
	if got, ok := ConcSlotGate(ConcSlotKey(g, 3)); !ok || got != g {
		t.Errorf("ConcSlotGate(%s.3) = %s, %v", g, got, ok)
	}
}
