package registry_test

import (
	"testing"

	"github.com/skillbus/skillbus/pkg/registry"
	"github.com/skillbus/skillbus/pkg/skill"
)

// A trigger that is a phrase is searched as a trigger is: "packing" finds the
// skill whose trigger is "packing list", as a trigger match.
func TestSearchFindsTriggerPhrases(t *testing.T) {
	t.Parallel()
	pack := &skill.Skill{Name: "trip-helper", Description: "Helps with trips.", Triggers: []string{"com.example.trip"}, TriggerPhrases: []string{"packing list", "what to pack"}}
	other := &skill.Skill{Name: "notes", Description: "Keeps notes."}
	res, err := registry.Search([]*skill.Skill{pack, other}, registry.SearchRequest{Query: "packing"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Name != "trip-helper" || len(res[0].Matched) == 0 || res[0].Matched[0] != "triggers" {
		t.Fatalf("search packing: %+v, want trip-helper matched by its triggers", res)
	}
	if len(pack.Triggers) != 1 {
		t.Fatalf("search changed the skill's triggers: %v", pack.Triggers)
	}
}
