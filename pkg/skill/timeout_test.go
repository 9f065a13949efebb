package skill

import (
	"strings"
	"testing"
)

// A tool call's own timeout (args.timeout of exec and http) longer than the
// step's or the skill's is warned of: the shorter one stops the call first.
func TestToolTimeoutWarnings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, skill, step string
		want              []string
	}{
		{"seconds over the default", "", "    tool: exec\n    args: {command: [sleep, '9'], timeout: 120}\n", []string{
			"skills/x/skill.yaml:7:44: warning: step a's exec call may run 2m0s (args.timeout), longer than the skill's timeout 30s, which stops it first (hint: set the skill's timeout (timeout: 2m; the default is 30s), or lower args.timeout)"}},
		{"duration over the skill's", "timeout: 1m\n", "    tool: http\n    args: {url: 'http://x', timeout: 90s}\n", []string{
			"skills/x/skill.yaml:8:38: warning: step a's http call may run 1m30s (args.timeout), longer than the skill's timeout 1m0s, which stops it first (hint: raise the skill's timeout (timeout: 1m30s), or lower args.timeout)"}},
		{"quoted seconds", "", "    tool: exec\n    args:\n      command: [sleep, '9']\n      timeout: '45'\n", []string{
			"skills/x/skill.yaml:9:16: warning: step a's exec call may run 45s (args.timeout)"}},
		{"over the step's", "timeout: 5m\n", "    timeout: 10s\n    tool: exec\n    args: {command: [sleep, '9'], timeout: 20}\n", []string{
			"skills/x/skill.yaml:9:44: warning: step a's exec call may run 20s (args.timeout), longer than the step's timeout 10s, which stops it first (hint: raise the step's timeout, or lower args.timeout)"}},
		{"within", "timeout: 5m\n", "    tool: exec\n    args: {command: [sleep, '9'], timeout: 2m}\n", nil},
		{"equal", "", "    tool: exec\n    args: {command: [sleep, '9'], timeout: 30}\n", nil},
		{"template", "", "    tool: exec\n    args: {command: [sleep, '9'], timeout: '{{ execution.attempt }}'}\n", nil},
		{"another tool's timeout", "", "    tool: acme.export\n    args: {timeout: 600}\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ds := ParseWorkflow("skills/x/skill.yaml", []byte("name: x\ndescription: d\ntriggers: [t.x]\n"+tt.skill+"steps:\n  - id: a\n"+tt.step))
			var got []string
			for _, d := range ds {
				got = append(got, d.String())
			}
			if len(got) != len(tt.want) {
				t.Fatalf("diagnostics %q, want %q", got, tt.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("diagnostic %q, want it to start %q", got[i], tt.want[i])
				}
			}
		})
	}
}
