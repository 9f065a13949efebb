package flow

import (
	"errors"
	"slices"
	"testing"
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
