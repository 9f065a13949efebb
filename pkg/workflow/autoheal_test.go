package workflow_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/workflow"
)

func TestAutoHealRule(t *testing.T) {
	t.Parallel()
	fails := func(msg string) tool.Tool {
		return tool.Func("deploy", func(context.Context, tool.Call) (any, error) { return nil, failure.Fatalf("%s", msg) })
	}
	detect := skill.Step{ID: "detect", Condition: "deploy_step", Compute: `t = str(deploy_step).lower()
result = {"needs_auth": "401" in t, "needs_vpn": "no route" in t}`, Output: "info"}
	for _, tt := range []struct {
		name      string
		err       string
		steps     []skill.Step
		want      []workflow.AutoHeal
		retryOf   map[string]string
		notHealed []string
	}{
		{
			name: "through a compute step: the true key is the failure type",
			err:  "HTTP 401 unauthorized",
			steps: []skill.Step{
				{ID: "deploy_step", Tool: "deploy", OnError: "continue"},
				detect,
				{ID: "fix_vpn", Tool: "vpn_connect", Condition: "info and info.get('needs_vpn')"},
				{ID: "fix_auth", Tool: "kube_login", Condition: "info and info['needs_auth']"},
				{ID: "again", Tool: "deploy", Condition: "info", OnError: "continue"},
			},
			want:      []workflow.AutoHeal{{Step: "deploy_step", HealStep: "fix_auth", Action: "kube_login", FailureType: "needs_auth", Error: "HTTP 401 unauthorized"}},
			retryOf:   map[string]string{"again": "deploy_step"},
			notHealed: []string{"fix_vpn"},
		},
		{
			name: "reading the failed step directly: the failure class is the type",
			err:  "no route to host",
			steps: []skill.Step{
				{ID: "deploy_step", Tool: "deploy", OnError: "continue"},
				{ID: "fix", Tool: "vpn_connect", Condition: "'❌' in str(deploy_step)"},
			},
			want: []workflow.AutoHeal{{Step: "deploy_step", HealStep: "fix", Action: "vpn_connect", FailureType: "fatal", Error: "no route to host"}},
		},
		{
			name: "attribute reads count, and taint passes through two compute steps",
			err:  "no route to host",
			steps: []skill.Step{
				{ID: "deploy_step", Tool: "deploy", OnError: "continue"},
				detect,
				{ID: "plan", Compute: "result = {'vpn': info.needs_vpn}"},
				{ID: "fix", Tool: "vpn_connect", Condition: "plan.vpn"},
			},
			want: []workflow.AutoHeal{{Step: "deploy_step", HealStep: "fix", Action: "vpn_connect", FailureType: "vpn", Error: "no route to host"}},
		},
		{
			name: "a condition on a successful step is no heal",
			steps: []skill.Step{
				{ID: "ok", Tool: "vpn_connect"},
				{ID: "next", Tool: "kube_login", Condition: "ok"},
			},
		},
		{
			name: "a tool step's result does not carry the taint",
			err:  "no route to host",
			steps: []skill.Step{
				{ID: "deploy_step", Tool: "deploy", OnError: "continue"},
				{ID: "probe", Tool: "vpn_connect", Args: map[string]any{"e": "{{ deploy_step }}"}},
				{ID: "next", Tool: "kube_login", Condition: "probe"},
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := &journal{}
			e := newEngine(t, workflow.Config{}, fails(tt.err), tool.Func("vpn_connect", func(context.Context, tool.Call) (any, error) { return "ok", nil }),
				tool.Func("kube_login", func(context.Context, tool.Call) (any, error) { return "ok", nil }))
			_, l, err := e.ExecuteLog(deadline(t), workflow.Run{Skill: wf(tt.steps), Observer: j})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, j.heals); d != "" {
				t.Errorf("heals (-want +got)\n%s", d)
			}
			for _, s := range l.Steps {
				if s.RetryOf != tt.retryOf[s.ID] {
					t.Errorf("%s: retry_of %q, want %q", s.ID, s.RetryOf, tt.retryOf[s.ID])
				}
			}
			for _, h := range tt.want {
				if i := j.index("start " + h.HealStep + " tool"); i < 1 || j.lines[i-1][:5] != "heal " {
					t.Errorf("the heal of %s is not reported just before it starts: %v", h.HealStep, j.lines)
				}
			}
		})
	}
}
