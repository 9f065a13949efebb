package expr_test

import (
	"context"
	"slices"
	"testing"

	"github.com/skillbus/skillbus/pkg/expr"
	"github.com/skillbus/skillbus/pkg/failure"
)

// A missing key and an unknown filter carry a failure.Fault that names what was
// missing and what the value has, so a repairer need not parse messages.
func TestFaults(t *testing.T) {
	tpl, err := expr.ParseTemplate("{{ steps.fetch.result.titel }}", expr.WithName("args.q"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tpl.Eval(context.Background(), expr.Env{"steps": map[string]any{"fetch": map[string]any{"result": map[string]any{"title": "t", "body": "b"}}}})
	f := failure.FaultOf(err)
	if f == nil {
		t.Fatalf("no fault in %v", err)
	}
	if f.Kind != failure.FaultReference || f.Name != "titel" || f.Value != "steps.fetch.result" || f.Field != "args.q" || !slices.Equal(f.Have, []string{"body", "title"}) {
		t.Fatalf("fault %+v", f)
	}
	if failure.ClassOf(err) != failure.Repairable {
		t.Fatalf("class %s", failure.ClassOf(err))
	}

	_, err = expr.ParseTemplate("{{ x | lowr }}", expr.WithName("args.x"))
	f = failure.FaultOf(err)
	if f == nil || f.Kind != failure.FaultUnknownFilter || f.Name != "lowr" || !slices.Contains(f.Have, "lower") {
		t.Fatalf("fault %+v of %v", f, err)
	}
}
