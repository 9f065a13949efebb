package skill_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/pkg/skill"
)

func TestRepairField(t *testing.T) {
	for _, tc := range []struct{ val, want, err string }{
		{"auto", skill.RepairAuto, ""},
		{"off", skill.RepairOff, ""},
		{"automatic", "", `repair "automatic" is not valid`},
	} {
		src := "---\nname: r\ndescription: d\nrepair: " + tc.val + "\n---\nbody\n"
		s, diags := skill.ParseSkillMD("SKILL.md", []byte(src))
		if tc.err != "" {
			if !strings.Contains(fmt.Sprint(diags), tc.err) {
				t.Errorf("repair: %s: diagnostics %v, want %q", tc.val, diags, tc.err)
			}
			continue
		}
		if s == nil || s.Repair != tc.want {
			t.Errorf("repair: %s: got %+v %v", tc.val, s, diags)
		}
	}
}
