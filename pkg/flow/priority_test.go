package flow

import (
	"errors"
	"strings"
	"testing"
)

func TestPriorityCompile(t *testing.T) {
	for _, tc := range []struct {
		src, err string
	}{
		{src: "300"},
		{src: "-600"},
		{src: "2.5"},
		{src: `data.plan == "enterprise" ? 300 : 0`},
		{src: `data.vip ? (data.urgent ? 600 : 120) : -60`},
		{src: "data.wait"},
		{src: "601", err: "1:1: a queue priority is -600 to 600 seconds; 601 is out of range"},
		{src: "-900", err: "out of range"},
		{src: `data.vip ? 900 : 0`, err: "1:12: a queue priority is -600 to 600 seconds; 900 is out of range"},
		{src: `data.vip ? 0.0 : 600.5`, err: "600.5 is out of range"},
		{src: `"high"`, err: "a queue priority must be a number of seconds; this is string"},
		{src: `high`, err: "undeclared reference to 'high'"},
		{src: `data.x > 1`, err: "this is bool"},
	} {
		_, err := Compile(tc.src, Priority)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.src, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: got %v, want %q", tc.src, err, tc.err)
		case tc.err != "":
			var fe *Error
			if !errors.As(err, &fe) {
				t.Errorf("%s: %T is not a *flow.Error", tc.src, err)
			}
		}
	}
}

func TestPriorityOf(t *testing.T) {
	for _, tc := range []struct {
		src  string
		data any
		want int
		err  bool
	}{
		{src: "300", want: 300},
		{src: `data.plan == "enterprise" ? 300 : 0`, data: map[string]any{"plan": "enterprise"}, want: 300},
		{src: `data.plan == "enterprise" ? 300 : 0`, data: map[string]any{"plan": "free"}, want: 0},
		{src: "data.wait", data: map[string]any{"wait": 5000.0}, want: 600},
		{src: "data.wait", data: map[string]any{"wait": -5000.0}, want: -600},
		{src: "data.wait", data: map[string]any{"wait": 12.6}, want: 13},
		{src: "int(data.wait) * 100", data: map[string]any{"wait": 9.0}, want: 600},
		{src: "data.wait", data: map[string]any{"wait": "soon"}, err: true},
		{src: "data.wait", data: map[string]any{}, err: true},
	} {
		p, err := Compile(tc.src, Priority)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		got, err := p.PriorityOf(&Event{Data: tc.data})
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s over %v = %d, %v; want %d (error %v)", tc.src, tc.data, got, err, tc.want, tc.err)
		}
	}
}
