package events

import "testing"

// Keys of KV runs are read back from whatever the bucket holds, which anyone with
// write access may have written: each reader takes only its own kind of key, and
// gives back what its writer put in.
func FuzzRunKeys(f *testing.F) {
	for _, s := range []string{"3f2a9c", "send-report", "skill.x.hold", "a.cancel", "x.paused", "", ".", "skill..hold", "skill.a.b.hold"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		kinds := 0
		for _, read := range []func(string) (string, bool){PausedExecution, CancelledExecution, HeldExecution, HeldSkill} {
			if _, ok := read(s); ok {
				kinds++
			}
		}
		if kinds > 1 {
			t.Fatalf("key %q is read as %d kinds of record", s, kinds)
		}
		if CheckToken("name", s) != nil {
			return
		}
		for _, c := range []struct {
			key  func(string) string
			read func(string) (string, bool)
		}{{RunPausedKey, PausedExecution}, {RunCancelKey, CancelledExecution}, {RunHeldKey, HeldExecution}, {SkillHoldKey, HeldSkill}} {
			if got, ok := c.read(c.key(s)); !ok || got != s {
				t.Fatalf("key of %q read back as %q, %v", s, got, ok)
			}
		}
	})
}
