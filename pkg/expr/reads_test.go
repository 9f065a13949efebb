package expr

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReads(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind string // template, expr or program
		src  string
		want []Read
	}{
		{"template", "Branch {{ inputs.issue_key }} of {{ branch_name }}", []Read{
			{Name: "inputs", Line: 1, Col: 11, Key: "issue_key", KeyLine: 1, KeyCol: 18},
			{Name: "branch_name", Line: 1, Col: 37},
		}},
		// Attribute access reads the key even when it is a dict method's name;
		// a call is the method and reads no key.
		{"template", "{{ inputs.items }} {{ inputs.items() | length }}", []Read{
			{Name: "inputs", Line: 1, Col: 4, Key: "items", KeyLine: 1, KeyCol: 11},
			{Name: "inputs", Line: 1, Col: 23},
		}},
		{"expr", "failure_info and failure_info.get('needs_vpn')", []Read{
			{Name: "failure_info", Line: 1, Col: 1},
			{Name: "failure_info", Line: 1, Col: 18, Key: "needs_vpn", KeyLine: 1, KeyCol: 36},
		}},
		{"expr", `pods["é"] | length > 0 and x.count is defined`, []Read{
			{Name: "pods", Line: 1, Col: 1, Key: "é", KeyLine: 1, KeyCol: 7},
			{Name: "x", Line: 1, Col: 28, Key: "count", KeyLine: 1, KeyCol: 30},
		}},
		// Names the block assigns, comprehension variables and builtins are not
		// reads of env.
		{"program", "n = 0\nfor p in pods:\n  n += len(p)\nresult = [q for q in n_list] + [inputs.a]", []Read{
			{Name: "pods", Line: 2, Col: 10},
			{Name: "n_list", Line: 4, Col: 22},
			{Name: "inputs", Line: 4, Col: 33, Key: "a", KeyLine: 4, KeyCol: 40},
		}},
		{"template", "no expressions", nil},
	}
	for _, tt := range tests {
		var got []Read
		switch tt.kind {
		case "template":
			tm, err := ParseTemplate(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			got = tm.Reads()
		case "expr":
			e, err := ParseExpr(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			got = e.Reads()
		case "program":
			p, err := ParseProgram(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			got = p.Reads()
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tt.src, diff)
		}
	}
}
