package flow

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWaitMatch(t *testing.T) {
	t.Parallel()
	ev := &WaitEvent{ID: "e1", Type: "com.example.order.paid", Source: "/shop", Data: map[string]any{"order": "o-1", "amount": 250.0}}
	inputs := map[string]any{"order": "o-1"}
	steps := map[string]any{"create": map[string]any{"id": "o-1"}}
	for _, tt := range []struct {
		src       string
		want      bool
		err       bool
		names     []string
		all       bool
		noInputs  bool
		noResults bool
	}{
		{src: `event.data.order == inputs.order`, want: true},
		{src: `event.data.order == steps.create.id && event.data.amount > 100`, want: true, names: []string{"create"}},
		{src: `event.data.order == steps["create"].id`, want: true, names: []string{"create"}},
		{src: `size(steps) == 1`, want: true, all: true},
		{src: `event.type == "com.example.order.paid" && event.source == "/shop" && event.id == "e1"`, want: true},
		{src: `event.data.order == "o-2"`, want: false},
		{src: `event.data.coupon == "x"`, err: true},
		{src: `has(inputs.order)`, noInputs: true, want: false},
	} {
		m, err := CompileWaitMatch(tt.src)
		if err != nil {
			t.Fatalf("%s: %v", tt.src, err)
		}
		names, all := m.Steps()
		if !slices.Equal(names, tt.names) || all != tt.all {
			t.Errorf("%s: steps read = %v, %v; want %v, %v", tt.src, names, all, tt.names, tt.all)
		}
		in := any(inputs)
		if tt.noInputs {
			in = nil
		}
		got, err := m.Match(ev, in, steps)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("%s: Match = %v, %v; want %v, error %v", tt.src, got, err, tt.want, tt.err)
		}
	}
}

func TestCompileWaitMatchErrors(t *testing.T) {
	t.Parallel()
	for src, col := range map[string]int{
		"":                          1,
		"event.data.amount + 1":     1,
		"event.data.order ==":       20,
		"trigger.data.order == 1":   1,
		"event.data.order == 'x' &": 25,
	} {
		_, err := CompileWaitMatch(src)
		var fe *Error
		if !errors.As(err, &fe) || fe.Line != 1 || fe.Column != col {
			t.Errorf("CompileWaitMatch(%q) = %v; want an *Error at 1:%d", src, err, col)
		}
	}
}

// FuzzCompileWaitMatch: a match from a skill file never panics the compiler, and
// one that compiles evaluates to a verdict or an error over any event.
func FuzzCompileWaitMatch(f *testing.F) {
	for _, s := range []string{
		`event.data.order == inputs.order`,
		`event.data.order == steps.create.id && event.data.amount > 100`,
		`size(steps) > 0 || has(event.data.x)`,
		`event.data.items.exists(i, i.sku == inputs.sku)`,
		`event.type.startsWith("com.") && event.source != ""`,
		`((((`, `event.`, `"\xff"`,
	} {
		f.Add(s)
	}
	ev := &WaitEvent{ID: "e", Type: "t", Data: map[string]any{"order": "o", "items": []any{map[string]any{"sku": "a"}}}}
	f.Fuzz(func(t *testing.T, src string) {
		m, err := CompileWaitMatch(src)
		if err != nil {
			var fe *Error
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not an *Error", err)
			}
			return
		}
		_, _ = m.Match(ev, map[string]any{"order": "o"}, map[string]any{"create": map[string]any{"id": "o"}})
	})
}

// A wait keeps only what its match reads of the run: the fields it selects, all
// of a value it reads otherwise, and every step's result when it reads steps
// otherwise; keeping that much gives the same answer as keeping everything.
func TestWaitMatchKeepsWhatItReads(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 1<<10)
	inputs := map[string]any{"order": "o-1", "customer": map[string]any{"id": "c-1", "notes": big}, "items": []any{"a", "b"}, "blob": big}
	steps := map[string]any{
		"create": map[string]any{"id": "o-1", "body": big},
		"greet":  "hi",
		"other":  map[string]any{"x": big},
	}
	ev := &WaitEvent{Type: "t", Data: map[string]any{"order": "o-1", "customer": "c-1", "n": 2.0}}
	for _, tt := range []struct {
		src       string
		in        any
		steps     map[string]any
		wantMatch bool
	}{
		{`event.data.order == "o-1"`, nil, nil, true},
		{`event.data.order == inputs.order`, map[string]any{"order": "o-1"}, nil, true},
		{`event.data.customer == inputs.customer.id && has(inputs.customer.vip)`,
			map[string]any{"customer": map[string]any{"id": "c-1"}}, nil, false},
		{`event.data.customer == inputs["customer"]["id"]`, map[string]any{"customer": map[string]any{"id": "c-1"}}, nil, true},
		{`size(inputs.items) == event.data.n`, map[string]any{"items": []any{"a", "b"}}, nil, true},
		{`size(inputs) == 4`, inputs, nil, true},
		{`inputs.customer.id == "c-1" && inputs.customer == {"id": "c-1", "notes": inputs.blob}`,
			map[string]any{"customer": inputs["customer"], "blob": big}, nil, true},
		{`inputs.missing == 1`, map[string]any{}, nil, false},
		{`steps.create.id == event.data.order && steps.greet == "hi"`, nil,
			map[string]any{"create": map[string]any{"id": "o-1"}, "greet": "hi"}, true},
		{`steps.create == {"id": "o-1", "body": steps.create.body}`, nil, map[string]any{"create": steps["create"]}, true},
		{`size(steps) == 3`, nil, steps, true},
	} {
		m, err := CompileWaitMatch(tt.src)
		if err != nil {
			t.Fatalf("%s: %v", tt.src, err)
		}
		in, st := m.Keep(inputs, steps)
		if diff := cmp.Diff(tt.in, in); diff != "" {
			t.Errorf("%s: inputs kept (-want +got):\n%s", tt.src, diff)
		}
		if diff := cmp.Diff(tt.steps, st); diff != "" {
			t.Errorf("%s: steps kept (-want +got):\n%s", tt.src, diff)
		}
		full, errFull := m.Match(ev, inputs, steps)
		kept, errKept := m.Match(ev, in, st)
		if full != kept || (errFull == nil) != (errKept == nil) || kept != tt.wantMatch {
			t.Errorf("%s: match on what is kept = %v, %v; on everything %v, %v; want %v", tt.src, kept, errKept, full, errFull, tt.wantMatch)
		}
	}
}

// Refs name each input and step a match selects by name, where the name is
// written, so that a loader can report a misspelt one at its column.
func TestWaitMatchRefs(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		src  string
		want []Ref
	}{
		{`event.data.order == "o-1"`, nil},
		{`event.data.customer == inputs.customr`, []Ref{{Root: "inputs", Name: "customr", Line: 1, Column: 31}}},
		{`inputs["order"] == event.data.order && steps.create.id == event.data.id`, []Ref{
			{Root: "inputs", Name: "order", Line: 1, Column: 8},
			{Root: "steps", Name: "create", Line: 1, Column: 46},
		}},
		{"has(event.data.x) &&\n  has(inputs.vip)", []Ref{{Root: "inputs", Name: "vip", Line: 2, Column: 14}}},
		{`size(inputs) == 1 && size(steps) == 2`, nil},
	} {
		m, err := CompileWaitMatch(tt.src)
		if err != nil {
			t.Fatalf("%s: %v", tt.src, err)
		}
		if diff := cmp.Diff(tt.want, m.Refs()); diff != "" {
			t.Errorf("%s: refs (-want +got):\n%s", tt.src, diff)
		}
	}
}
