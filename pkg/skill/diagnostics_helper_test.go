package skill

import (
	"strings"
	"testing"
)

// parseExpecting parses doc as the SKILL.md at path and checks that its
// diagnostics, with the file's name left out, start with want, one for one and
// in order. ok is false when they hold an error: there is then
// no skill to check further.
func parseExpecting(t *testing.T, path string, doc []byte, want []string) (s *Skill, ok bool) {
	t.Helper()
	s, ds := ParseSkillMD(path, doc)
	var got []string
	for _, d := range ds {
		got = append(got, strings.TrimPrefix(d.String(), path+":"))
	}
	if len(got) != len(want) {
		t.Fatalf("diagnostics %q, want %d starting %q", got, len(want), want)
	}
	for i := range got {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("diagnostic %d is %q, want it to start %q", i, got[i], want[i])
		}
	}
	return s, !ds.HasErrors()
}
