package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/tool/llm/llmtest"
)

// startDev starts `skillbus dev --port <a free port>` with args and waits until it
// runs. natstest.FreePort keeps test processes off each other's ports, but anything
// else on the machine may still bind the port first; dev then exits saying so, and
// is started again on another port. It returns the process, the port and the
// arguments it was started with.
func startDev(t *testing.T, args ...string) (*proc, int, []string) {
	t.Helper()
	for try := 1; ; try++ {
		port := natstest.FreePort(t)
		all := append([]string{"dev", "--port", strconv.Itoa(port)}, args...)
		dev := start(t, "skillbus", all...)
		natstest.Eventually(t, 30*time.Second, func() bool {
			out := dev.out.String()
			return strings.Contains(out, "skillbus dev is running") || strings.Contains(out, "address already in use")
		}, "skillbus dev did not start:\n%s", dev.out.String())
		if strings.Contains(dev.out.String(), "skillbus dev is running") || try == 5 {
			return dev, port, all
		}
		t.Logf("port %d was taken before dev bound it; trying another", port)
	}
}

// skillbus runs the CLI to completion and returns its output and exit code.
func skillbus(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "skillbus"), args...)
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), natstest.RaceEnv())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String(), ee.ExitCode()
	}
	t.Fatalf("skillbus %v: %v\n%s", args, err, out.String())
	return "", -1
}

// The README's tour: `skillbus dev` in one terminal, `skillbus trigger` in another.
func TestDevAndTrigger(t *testing.T) {
	t.Parallel()
	// A chat-completions server with the model's side of summarize-ticket scripted:
	// call echo, read the style guide, answer.
	model := llmtest.Script(t,
		llmtest.Calls(llmtest.ToolCall("c1", "echo", map[string]any{"note": "checking"})),
		llmtest.Calls(llmtest.ToolCall("c2", "read_reference", map[string]any{"path": "references/style.md"})),
		llmtest.Text(`{"summary": "Ada cannot log in since the upgrade.", "severity": "high"}`),
	)
	_, port, _ := startDev(t, "--store", t.TempDir(),
		"--skills", "testdata/skills", "--skills", "testdata/e2e", "--backoff-base=20ms", "--backoff-max=50ms",
		"--llm-url", model.URL(), "--llm-model", "scripted")
	url := "--nats-url=nats://127.0.0.1:" + strconv.Itoa(port)

	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/down" {
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	t.Cleanup(web.Close) // after the parallel subtests, which run once this function returns

	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"explicit", []string{"trigger", "--skill", "hello", "--data", `{"name":"Ada"}`, "--wait"}, 0,
			[]string{"routed to hello@1.0.0 (forced)", "compose", "Hello, Ada!"}},
		{"chosen id", []string{"trigger", "--skill", "hello", "--id", "dup-1", "--data", `{"name":"Ann"}`, "--wait"}, 0,
			[]string{"Hello, Ann!"}},
		// The same source and id again: JetStream drops it, and the CLI says so
		// rather than show the first trigger's result as if it were this one's.
		{"duplicate id", []string{"trigger", "--skill", "hello", "--id", "dup-1", "--data", `{"name":"Bea"}`, "--wait"}, 0,
			[]string{"not published: a duplicate of the trigger at seq", "Hello, Ann!"}},
		// CloudEvents identifies an event by source and id: another source's
		// dup-1 is another trigger.
		{"same id, another source", []string{"trigger", "--skill", "hello", "--id", "dup-1", "--source", "/elsewhere", "--data", `{"name":"Cy"}`, "--wait"}, 0,
			[]string{"Hello, Cy!"}},
		{"duplicate id, no wait", []string{"trigger", "--skill", "hello", "--id", "dup-1", "--data", `{"name":"Bea"}`}, 0,
			[]string{"not published: a duplicate of the trigger at seq="}},
		{"by type", []string{"trigger", "com.example.greet", "--data", `{"name":"Grace","shout":true}`, "--wait"}, 0,
			[]string{"routed to hello", "HELLO, GRACE!"}},
		{"exec tool", []string{"trigger", "com.example.text.submitted", "--data", `{"text":"one two three"}`, "--wait"}, 0,
			[]string{`"words": 3`}},
		{"fallback", []string{"trigger", "com.example.order.created", "--data", `{"order_id":"ORD-7","quantity":50}`, "--wait"}, 0,
			[]string{"fallback: queue-backorder", "refuse failed (fatal)", "falling back to queue-backorder", "backordered"}},
		{"no fallback needed", []string{"trigger", "com.example.order.created", "--data", `{"order_id":"ORD-8","quantity":2}`, "--wait"}, 0,
			[]string{"reserve-stock completed", `"reserved": 2`}},
		{"retries then DLQ", []string{"trigger", "--skill", "always-retry", "--wait"}, 1,
			[]string{"↻ attempt 1 of 3 failed; attempt 2 in ", "dead-lettered to skillbus.dead.always-retry", "always-retry failed (retryable, after 3 attempts)"}},
		{"http tool", []string{"trigger", "com.example.url.check", "--data", `{"url":"` + web.URL + `/up"}`, "--wait"}, 0,
			[]string{`"status": 200`, `"ok": true`}},
		{"http 503 retried then DLQ", []string{"trigger", "com.example.url.check", "--data", `{"url":"` + web.URL + `/down"}`, "--wait"}, 1,
			[]string{"↻ attempt 1 of 3 failed; attempt 2 in ", "503", "check-url failed (retryable, after 3 attempts)"}},
		{"skill tool", []string{"trigger", "--skill", "delegate", "--data", `{"who":"Lin"}`, "--wait"}, 0,
			[]string{"tool skill", `"relayed": "Hello, Lin!"`}},
		{"delegation depth bounded", []string{"trigger", "--skill", "recurse", "--wait"}, 1,
			[]string{"would delegate 3 levels deep; the limit is 2"}},
		{"invalid input", []string{"trigger", "--skill", "reserve-stock", "--data", `{"order_id":"bad id","quantity":1}`, "--wait"}, 1,
			[]string{"does not match pattern"}},
		{"unmatched", []string{"trigger", "com.example.nobody", "--wait"}, 3, []string{"no_skill"}},
		{"unknown skill", []string{"trigger", "--skill", "nosuch", "--wait"}, 3, []string{"unknown_skill"}},
		{"bad json", []string{"trigger", "--skill", "hello", "--data", `{nope`}, 2, []string{"not valid JSON"}},
		{"skills list", []string{"skills", "list"}, 0, []string{"hello", "word-count", "com.example.order.created"}},
		{"instruction skill", []string{"trigger", "com.example.ticket.opened", "--data", `{"title":"login broken","customer":"Ada"}`, "--wait"}, 0,
			[]string{"turn-1 (model)", "turn-1.call-0 (tool echo)", "turn-2.call-0 (tool read_reference)", `"severity": "high"`}},
		{"script skill", []string{"trigger", "com.example.upload.received", "--data", `{"name":"x"}`, "--wait"}, 0,
			[]string{"entrypoint-default (tool exec)", `"bytes": 12`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The triggers with the id dup-1 depend on each other's order; each of the
			// others is on its own and mostly waits on its process, so they share the dev.
			if !slices.Contains(tt.args, "dup-1") {
				t.Parallel()
			}
			out, code := skillbus(t, append(tt.args, url)...)
			if code != tt.code {
				t.Fatalf("exit code %d, want %d\n%s", code, tt.code, out)
			}
			if tt.name == "duplicate id" && strings.Index(out, "not published") > strings.Index(out, "Hello, Ann!") {
				t.Errorf("the duplicate's notice came after the earlier trigger's result:\n%s", out)
			}
			if tt.name == "instruction skill" {
				// The model got the body as its system prompt and the reference on request.
				reqs := model.Requests()
				if len(reqs) != 3 {
					t.Fatalf("the model was asked %d times, want 3", len(reqs))
				}
				first, _ := json.Marshal(reqs[0])
				last, _ := json.Marshal(reqs[2])
				if !strings.Contains(string(first), "You summarise support tickets") || !strings.Contains(string(last), "at most 20 words") {
					t.Errorf("system prompt or reference missing:\n%s\n%s", first, last)
				}
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
