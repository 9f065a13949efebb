package workflow

import (
	"testing"

	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
)

// TestCompileOncePerVersion checks that a skill version's expressions are
// compiled once and shared by its runs, with or without a content digest, and
// that another version gets its own.
func TestCompileOncePerVersion(t *testing.T) {
	t.Parallel()
	e, err := New(Config{Tools: &tool.Set{}})
	if err != nil {
		t.Fatal(err)
	}
	wf := func(cond string) *skill.Workflow {
		return &skill.Workflow{Steps: []skill.Step{{ID: "a", Compute: "result = 1", Condition: cond}}}
	}
	for _, digest := range []string{"", "sha256:abc"} {
		first, err := e.compile(&skill.Skill{Name: "s", Digest: digest, Workflow: wf("x > 1")})
		if err != nil {
			t.Fatal(err)
		}
		// A new *Skill, as a worker decodes from the catalog for each job.
		again, err := e.compile(&skill.Skill{Name: "s", Digest: digest, Workflow: wf("x > 1")})
		if err != nil {
			t.Fatal(err)
		}
		if again != first {
			t.Errorf("digest %q: the same version was compiled twice", digest)
		}
		if digest != "" {
			continue
		}
		other, err := e.compile(&skill.Skill{Name: "s", Workflow: wf("x > 2")})
		if err != nil {
			t.Fatal(err)
		}
		if other == first {
			t.Errorf("a changed workflow reused the old compiled one")
		}
	}
}
