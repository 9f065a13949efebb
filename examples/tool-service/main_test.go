package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/internal/otlptest"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/telemetry"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/bustool"
	"github.com/skillbus/skillbus/pkg/tool/tooltest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRun starts the service as `go run` would, finds its tools on the bus,
// calls them, and stops it.
func TestRun(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Conn(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr natstest.Buffer
	done := make(chan error, 1)
	env := map[string]string{"NATS_URL": srv.URL()}
	go func() {
		done <- run(ctx, []string{"--prefix", "ex", "--name", "example-test"}, func(k string) string { return env[k] }, &stdout, &stderr)
	}()

	var tools []*bustool.Tool
	natstest.Eventually(t, 10*time.Second, func() bool {
		var err error
		tools, err = bustool.Discover(t.Context(), nc, bustool.Config{Prefix: "ex"})
		return err == nil && len(tools) == 2
	}, "the service's tools were not discovered; stderr: %s", &stderr)
	if tools[0].Name() != "slugify" || tools[1].Name() != "word_stats" || tools[0].Description() == "" {
		t.Fatalf("discovered %v", describeTools(tools))
	}
	if props, _ := tools[0].InputSchema()["properties"].(map[string]any); props["text"] == nil {
		t.Errorf("slugify's schema has no text property: %v", tools[0].InputSchema())
	}

	res, err := tools[0].Call(t.Context(), tool.Call{Args: map[string]any{"text": "Crème Brûlée, for 2!"}})
	if err != nil || res != "creme-brulee-for-2" {
		t.Errorf("slugify = %v, %v", res, err)
	}
	res, err = tools[1].Call(t.Context(), tool.Call{Args: map[string]any{"text": "the cat saw the dog", "top": int64(1)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.(map[string]any)["top_words"]; !cmp.Equal(got, []any{map[string]any{"word": "the", "count": int64(2)}}) {
		t.Errorf("word_stats top_words = %v", got)
	}
	if _, err := tools[1].Call(t.Context(), tool.Call{Args: map[string]any{"txt": "x"}}); failure.ClassOf(err) != failure.Repairable {
		t.Errorf("a misspelt argument gave %v, want a Repairable error", err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after its context was cancelled")
	}
	if out := stdout.String(); !strings.Contains(out, "serving ex.tool.slugify, ex.tool.word_stats as example-test") || !strings.Contains(out, "stopped") {
		t.Errorf("stdout:\n%s", out)
	}
}

func TestRunBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		msg  string
	}{
		{[]string{"--nope"}, "flag provided but not defined"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"--nats-url", "nats://127.0.0.1:1"}, "connecting to nats://127.0.0.1:1"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			err := run(t.Context(), tt.args, func(string) string { return "" }, &out, &out)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("run(%q) = %v, want an error containing %q", tt.args, err, tt.msg)
			}
		})
	}
}

func describeTools(tools []*bustool.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name()+": "+t.Description())
	}
	return out
}

func TestSlugify(t *testing.T) {
	tests := []struct {
		text, sep string
		max       int
		want      string
	}{
		{"Hello, World", "-", 0, "hello-world"},
		{"Crème Brûlée, for 2!", "-", 0, "creme-brulee-for-2"},
		{"  --already-a-slug--  ", "-", 0, "already-a-slug"},
		{"Ångström_unit", "_", 0, "angstrom_unit"},
		{"ﬁnancial ½", "-", 0, "financial-1-2"},
		{"日本語 text", "-", 0, "text"},
		{"", "-", 0, ""},
		{"one two three", "-", 9, "one-two"},
		{"one two three", "-", 7, "one-two"},
		{"extraordinary", "-", 5, "extra"},
		{"a b", "", 0, "ab"},
	}
	for _, tt := range tests {
		if got := slugify(tt.text, tt.sep, tt.max); got != tt.want {
			t.Errorf("slugify(%q, %q, %d) = %q, want %q", tt.text, tt.sep, tt.max, got, tt.want)
		}
	}
}

func TestWordStats(t *testing.T) {
	tests := []struct {
		text string
		top  int
		want map[string]any
	}{
		{"", 5, map[string]any{
			"words": int64(0), "unique_words": int64(0), "characters": int64(0), "lines": int64(0),
			"sentences": int64(0), "avg_word_length": 0.0, "top_words": []any{},
		}},
		{"The cat sat. The cat ran!\nDon't stop", 2, map[string]any{
			"words": int64(8), "unique_words": int64(6), "characters": int64(36), "lines": int64(2),
			"sentences": int64(2), "avg_word_length": 3.38, "top_words": []any{
				map[string]any{"word": "cat", "count": int64(2)},
				map[string]any{"word": "the", "count": int64(2)},
			},
		}},
		{"no stop here\n", 0, map[string]any{
			"words": int64(3), "unique_words": int64(3), "characters": int64(13), "lines": int64(1),
			"sentences": int64(1), "avg_word_length": 3.33, "top_words": []any{},
		}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, wordStats(tt.text, tt.top)); diff != "" {
			t.Errorf("wordStats(%q) (-want +got):\n%s", tt.text, diff)
		}
	}
}

func TestSlugifyConformance(t *testing.T) {
	tooltest.Run(t, func(t *testing.T) tooltest.Fixture {
		return tooltest.Fixture{
			Tool:    slugifyTool,
			OK:      tool.Call{Args: map[string]any{"text": "Hello there", "max_length": int64(20)}},
			CheckOK: func(t *testing.T, res any) { check(t, res, "hello-there") },
			BadArg:  &tool.Call{Args: map[string]any{"text": "x", "separator": "abc"}},
		}
	})
}

func TestWordStatsConformance(t *testing.T) {
	tooltest.Run(t, func(t *testing.T) tooltest.Fixture {
		return tooltest.Fixture{
			Tool:   wordStatsTool,
			OK:     tool.Call{Args: map[string]any{"text": "a b a"}},
			BadArg: &tool.Call{Args: map[string]any{"text": "x", "top": int64(1000)}},
		}
	})
}

func check(t *testing.T, got, want any) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestRunContinuesTrace calls a tool with a trace context and finds the service's
// span in that trace, exported over OTLP when the service stops.
func TestRunContinuesTrace(t *testing.T) {
	rcv := otlptest.Start(t)
	srv := natstest.Start(t)
	nc := srv.Conn(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	env := map[string]string{"NATS_URL": srv.URL()}
	for _, e := range rcv.Env("example-tools") {
		k, v, _ := strings.Cut(e, "=")
		env[k] = v
	}
	var stdout, stderr natstest.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--name", "example-traced"}, func(k string) string { return env[k] }, &stdout, &stderr)
	}()
	slug, err := bustool.New(nc, "slugify", bustool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	const trace, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	callCtx := telemetry.Extract(t.Context(), "00-"+trace+"-"+parent+"-01", "")
	call := func() bool {
		res, err := slug.Call(callCtx, tool.Call{Args: map[string]any{"text": "A B"}})
		return err == nil && res == "a-b"
	}
	natstest.Eventually(t, 10*time.Second, call, "slugify never answered; stderr: %s", &stderr)
	// One more call once the service is surely up: under load the first answered
	// call can race the process's tracer set-up, and go unrecorded on this side.
	if !call() {
		t.Fatal("a second call failed")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	spans := otlptest.InTrace(rcv.Spans(), trace)
	otlptest.Must(t, spans, "process skillbus.tool.slugify")
	// Eventually may have called before the service served: a successful call is
	// one the service's span continues.
	var send, serve otlptest.Span
	for _, sv := range spans {
		for _, s := range spans {
			if sv.Name == "process skillbus.tool.slugify" && s.Name == "send skillbus.tool.slugify" && s.SpanID == sv.ParentSpanID {
				send, serve = s, sv
			}
		}
	}
	if send.SpanID == "" {
		t.Fatalf("no service span is a child of a call's span:\n%s", otlptest.Tree(spans))
	}
	if send.ParentSpanID != parent || serve.Service != "example-tools" || serve.Attrs["skillbus.tool.name"] != "slugify" {
		t.Errorf("send %v, serve %v %v", send, serve, serve.Attrs)
	}
}
