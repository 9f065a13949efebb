package route_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/route"
	"github.com/skillbus/skillbus/pkg/skill"
)

type catalog map[string]*skill.Skill

func (c catalog) Get(name string) (*skill.Skill, bool) { s, ok := c[name]; return s, ok }
func (c catalog) ByTrigger(typ string) []*skill.Skill {
	var out []*skill.Skill
	for _, s := range c {
		for _, t := range s.Triggers {
			if t == typ {
				out = append(out, s)
			}
		}
	}
	return out
}

func TestRoute(t *testing.T) {
	t.Parallel()
	cat := catalog{
		"a": {Name: "a", Triggers: []string{"x"}},
		"b": {Name: "b", Triggers: []string{"x"}, Priority: "high"},
		"c": {Name: "c", Triggers: []string{"x"}, Priority: "low"},
		"d": {Name: "d", Triggers: []string{"x"}, CostHint: "low"},
		"e": {Name: "e", Triggers: []string{"y"}},
	}
	names := func(cs []route.Candidate) (out []string) {
		for _, c := range cs {
			out = append(out, c.Skill.Name+"/"+c.Source)
		}
		return out
	}
	tests := []struct {
		trig route.Trigger
		want []string
		err  string
	}{
		{route.Trigger{Type: "x"}, []string{"b/rule", "d/rule", "a/rule", "c/rule"}, ""},
		{route.Trigger{Type: "y"}, []string{"e/rule"}, ""},
		{route.Trigger{Type: "x", Skill: "e"}, []string{"e/forced"}, ""},
		{route.Trigger{Type: "z"}, nil, "no skill matches"},
		{route.Trigger{Type: "x", Skill: "nope"}, nil, `skill "nope" is not in the catalog`},
	}
	for _, tt := range tests {
		got, err := route.Route(cat, tt.trig)
		if tt.err != "" {
			if err == nil || err.Error()[:len(tt.err)] != tt.err {
				t.Errorf("%+v: err %v, want %q", tt.trig, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tt.want, names(got)); d != "" {
			t.Errorf("%+v: (-want +got)\n%s", tt.trig, d)
		}
	}
	_, err := route.Route(cat, route.Trigger{Type: "z"})
	if !errors.Is(err, route.ErrNoMatch) {
		t.Errorf("err %v is not ErrNoMatch", err)
	}
	var unk *route.UnknownSkillError
	if _, err := route.Route(cat, route.Trigger{Skill: "nope"}); !errors.As(err, &unk) || unk.Name != "nope" {
		t.Errorf("err %v is not an UnknownSkillError", err)
	}
}
