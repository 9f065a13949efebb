package repair_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/repair"
	"github.com/skillbus/skillbus/pkg/tool/llm"
)

// chatServer answers every chat-completions request with answer (after delay).
func chatServer(t *testing.T, answer string, delay time.Duration) (*llm.Client, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role, Content string
			} `json:"messages"`
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) != 2 || !strings.Contains(req.Messages[1].Content, "=== skill.yaml ===") {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "c1", "object": "chat.completion", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": answer}}},
		})
	}))
	t.Cleanup(srv.Close)
	c, err := llm.New(llm.Config{URL: srv.URL + "/v1", Model: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return c, &calls
}

var diag = &repair.Diagnosis{Skill: "issue-title", Fault: failure.Fault{Kind: failure.FaultReference, Name: "titel", Step: "post"}, Error: `steps.fetch.result has no key "titel"`}

const goodDiff = "```diff\n--- a/skill.yaml\n+++ b/skill.yaml\n@@ -16,3 +16,3 @@\n       json:\n-        titel: \"{{ steps.fetch.result.titel }}\"\n+        titel: \"{{ steps.fetch.result.title }}\"\n         body: \"{{ steps.fetch.result.body | lowr }}\"\n```"

func TestChatRepairer(t *testing.T) {
	files := repair.Files{"skill.yaml": workflow}
	noValidation := func(context.Context, string, repair.Files) error { return nil }
	rejectAll := func(context.Context, string, repair.Files) error { return errors.New("skill.yaml:3: bad") }

	t.Run("good diff", func(t *testing.T) {
		c, _ := chatServer(t, goodDiff, 0)
		p, tried, err := repair.Propose(t.Context(), diag, files, []repair.Repairer{&repair.Chat{Model: c}}, noValidation, repair.Budget{}, 0)
		if err != nil || len(tried) != 0 {
			t.Fatalf("err %v, tried %v", err, tried)
		}
		if p.By != "chat" || p.Stats != (repair.Stats{Files: 1, Hunks: 1}) || !strings.Contains(p.Files["skill.yaml"], "result.title }}\"\n        body") {
			t.Fatalf("patch %+v\n%s", p, p.Files["skill.yaml"])
		}
	})
	t.Run("unfenced, without its last line break", func(t *testing.T) {
		// What a model answers as plain text, its trailing newline lost on the way.
		plain := repair.Diff(files, repair.Files{"skill.yaml": strings.Replace(workflow, "result.titel }}\"\n        body", "result.title }}\"\n        body", 1)})
		c, _ := chatServer(t, strings.TrimRight(plain, "\n")+"\n\n", 0)
		p, tried, err := repair.Propose(t.Context(), diag, files, []repair.Repairer{&repair.Chat{Model: c}}, noValidation, repair.Budget{}, 0)
		if err != nil || len(tried) != 0 || !strings.Contains(p.Files["skill.yaml"], "result.title }}\"\n        body") {
			t.Fatalf("err %v, tried %v", err, tried)
		}
		c, _ = chatServer(t, strings.TrimRight(plain, "\n"), 0)
		if p, tried, err = repair.Propose(t.Context(), diag, files, []repair.Repairer{&repair.Chat{Model: c}}, noValidation, repair.Budget{}, 0); err != nil || len(tried) != 0 {
			t.Fatalf("without a last line break: err %v, tried %v", err, tried)
		}
		if p.Files["skill.yaml"] != strings.Replace(workflow, "result.titel }}\"\n        body", "result.title }}\"\n        body", 1) {
			t.Fatalf("patched:\n%s", p.Files["skill.yaml"])
		}
	})
	t.Run("fails validation", func(t *testing.T) {
		c, calls := chatServer(t, goodDiff, 0)
		_, tried, err := repair.Propose(t.Context(), diag, files, []repair.Repairer{&repair.Chat{Model: c}, &repair.Chat{Model: c}, &repair.Chat{Model: c}}, rejectAll, repair.Budget{}, 0)
		if !errors.Is(err, repair.ErrOverBudget) {
			t.Fatalf("err %v, want over budget after two attempts", err)
		}
		if len(tried) != 2 || !strings.Contains(tried[0].Error, "does not validate") || calls.Load() != 2 {
			t.Fatalf("tried %+v, %d calls", tried, calls.Load())
		}
	})
	t.Run("over budget", func(t *testing.T) {
		c, _ := chatServer(t, goodDiff, 0)
		if _, _, err := repair.Propose(t.Context(), diag, files, []repair.Repairer{&repair.Chat{Model: c}}, noValidation, repair.Budget{MaxHunks: 1, MaxFiles: 1}, 0); err != nil {
			t.Fatalf("a one-hunk patch is within a one-hunk budget: %v", err)
		}
		two := "--- a/skill.yaml\n+++ b/skill.yaml\n@@ -1,1 +1,1 @@\n-name: issue-title\n+name: issue-titles\n@@ -17,1 +17,1 @@\n-        titel: \"{{ steps.fetch.result.titel }}\"\n+        titel: \"{{ steps.fetch.result.title }}\"\n"
		c2, _ := chatServer(t, two, 0)
		_, tried, err := repair.Propose(t.Context(), diag, files, []repair.Repairer{&repair.Chat{Model: c2}}, noValidation, repair.Budget{MaxHunks: 1}, 0)
		if err == nil || len(tried) != 1 || !strings.Contains(tried[0].Error, "2 hunks; at most 1") {
			t.Fatalf("err %v tried %+v", err, tried)
		}
		_, _, err = repair.Propose(t.Context(), diag, files, []repair.Repairer{&repair.Chat{Model: c}}, noValidation, repair.Budget{}, 2)
		if !errors.Is(err, repair.ErrOverBudget) {
			t.Fatalf("attempts spent: err %v", err)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		for _, answer := range []string{
			"Sure! Here is the fix: change titel to title.",
			"--- a/other.yaml\n+++ b/other.yaml\n@@ -1 +1 @@\n-a\n+b\n",
			"--- /dev/null\n+++ b/new.sh\n@@ -0,0 +1 @@\n+echo\n",
			"--- a/skill.yaml\n+++ b/skill.yaml\n@@ -17,1 +17,1 @@\n-        nothing like this\n+        x\n",
		} {
			c, _ := chatServer(t, answer, 0)
			_, tried, err := repair.Propose(t.Context(), diag, files, []repair.Repairer{&repair.Chat{Model: c}}, noValidation, repair.Budget{}, 0)
			if err == nil || len(tried) != 1 {
				t.Fatalf("answer %q accepted: tried %+v", answer, tried)
			}
		}
	})
	t.Run("timeout", func(t *testing.T) {
		c, _ := chatServer(t, goodDiff, 10*time.Second)
		start := time.Now()
		_, tried, err := repair.Propose(t.Context(), diag, files, []repair.Repairer{&repair.Chat{Model: c, Timeout: 200 * time.Millisecond}}, noValidation, repair.Budget{}, 0)
		if err == nil || len(tried) != 1 || !strings.Contains(tried[0].Error, "no answer within 200ms") {
			t.Fatalf("err %v tried %+v", err, tried)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("took %v", time.Since(start))
		}
	})
	t.Run("no fix", func(t *testing.T) {
		c, _ := chatServer(t, "NO FIX", 0)
		_, tried, err := repair.Propose(t.Context(), diag, files, []repair.Repairer{&repair.Chat{Model: c}}, noValidation, repair.Budget{}, 0)
		if !errors.Is(err, repair.ErrNoProposal) || len(tried) != 0 {
			t.Fatalf("err %v tried %v", err, tried)
		}
	})
}

// Deterministic repairers come first: a fault they fix never reaches the model.
func TestProposeOrder(t *testing.T) {
	c, calls := chatServer(t, goodDiff, 0)
	d := *diag
	d.Fault.Have, d.Fault.Value = []string{"body", "title"}, "steps.fetch.result"
	p, _, err := repair.Propose(t.Context(), &d, repair.Files{"skill.yaml": workflow}, append(repair.Deterministic(), &repair.Chat{Model: c}), nil, repair.Budget{}, 0)
	if err != nil || p.By != "reference" || calls.Load() != 0 {
		t.Fatalf("patch %+v err %v calls %d", p, err, calls.Load())
	}
}
