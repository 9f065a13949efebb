package events_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/invopop/jsonschema"
	sjs "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/skillbus/skillbus/events"
)

var update = flag.Bool("update", false, "rewrite events/schema/*.json from the Go types")

func generate(t *testing.T, typ string) []byte {
	t.Helper()
	// Consumers must tolerate fields added later, so additional properties are allowed.
	r := &jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true, AllowAdditionalProperties: true}
	s := r.Reflect(events.Catalog[typ])
	s.ID = jsonschema.ID("https://skillbus.dev/schema/" + typ + ".json")
	s.Title = typ
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// The embedded schemas are exactly what the Go types generate.
func TestSchemasAreCurrent(t *testing.T) {
	for _, typ := range events.Types() {
		want := generate(t, typ)
		path := filepath.Join("schema", typ+".json")
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got := events.Schema(typ); !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go test ./events -update", path)
		}
	}
}

// A payload that the Go type writes validates against its schema, and one missing a
// required field does not.
func TestSchemasValidatePayloads(t *testing.T) {
	samples := map[string]any{
		events.TypeExecutionCompleted: events.ExecutionCompleted{ExecutionID: "e", ActivationID: "a", Skill: "s", Outputs: map[string]any{"x": 1}, Attempt: 1},
		events.TypeRouteUnmatched:     events.RouteUnmatched{ActivationID: "a", Code: events.UnmatchedNoSkill, Reason: "r", Trigger: events.TriggerRef{Subject: "x"}},
		events.TypeJob:                events.Job{ExecutionID: "e", Skill: events.SkillRef{Name: "s", Pool: "default", ExecutionID: "e"}, Inputs: json.RawMessage(`{"a":1}`), Trigger: events.TriggerRef{Subject: "s"}},
	}
	c := sjs.NewCompiler()
	for typ, v := range samples {
		var doc any
		if err := json.Unmarshal(events.Schema(typ), &doc); err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource(typ, doc); err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile(typ)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		b, _ := json.Marshal(v)
		var inst any
		_ = json.Unmarshal(b, &inst)
		if err := sch.Validate(inst); err != nil {
			t.Errorf("%s: a payload from the Go type does not validate: %v", typ, err)
		}
		m := inst.(map[string]any)
		delete(m, "execution_id")
		delete(m, "activation_id")
		if err := sch.Validate(m); err == nil {
			t.Errorf("%s: a payload without its ids validates", typ)
		}
	}
}
