package events

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// TestIDsDoNotChange pins activation and execution ids: a trigger published again
// after an upgrade must find the activation the earlier version started.
func TestIDsDoNotChange(t *testing.T) {
	if got, want := ActivationID("/bench", "0"), "74132765875f249351a1ef50e663e498"; got != want {
		t.Errorf("ActivationID = %s, want %s", got, want)
	}
	if got, want := ExecutionID("/bench", "0", "noop"), "90bcfd650f86d2df80406302ad3e9fbd"; got != want {
		t.Errorf("ExecutionID = %s, want %s", got, want)
	}
	// The way ids were first computed, for parts of any length (the stack buffer
	// holds 256 bytes; longer parts must give the same id).
	reference := func(parts ...string) string {
		h := sha256.New()
		for _, p := range parts {
			h.Write([]byte{byte(len(p) >> 24), byte(len(p) >> 16), byte(len(p) >> 8), byte(len(p))})
			h.Write([]byte(p))
		}
		return hex.EncodeToString(h.Sum(nil))[:idLen]
	}
	for _, parts := range [][]string{{}, {""}, {"ab", "c"}, {"a", "bc"}, {strings.Repeat("x", 300), "y"}, {"é", strings.Repeat("\x00", 256)}} {
		if got, want := hash(parts...), reference(parts...); got != want {
			t.Errorf("hash(%q) = %s, want %s", parts, got, want)
		}
	}
	for _, c := range [][2]string{{"/bench", "0"}, {"/orders%20eu", "x"}, {"", ""}} {
		if got, want := string(AppendActivationID([]byte("p."), c[0], c[1])), "p."+ActivationID(c[0], c[1]); got != want {
			t.Errorf("AppendActivationID(%q, %q) = %s, want %s", c[0], c[1], got, want)
		}
	}
}
