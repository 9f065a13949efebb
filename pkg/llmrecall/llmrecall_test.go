package llmrecall_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/pkg/llmrecall"
	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool/llm"
	"github.com/skillbus/skillbus/pkg/tool/llm/llmtest"
)

var skills = []*skill.Skill{
	{Name: "pdf-summarizer", Description: "Summarize PDF documents.", Digest: "a"},
	{Name: "translate-text", Description: "Translate text\nbetween languages.", Digest: "b"},
}

func recaller(t *testing.T, srv *llmtest.Server, timeout time.Duration) *llmrecall.Recaller {
	t.Helper()
	cfg := srv.Config("m")
	cfg.Timeout = timeout
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := llmrecall.New(llmrecall.Config{Chat: c})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRecallSendsTheSkillListAndParsesTheAnswer(t *testing.T) {
	t.Parallel()
	srv := llmtest.Script(t, llmtest.Text(`{"matched_skills": [{"name": "translate-text", "description": "x"}, {"name": "made-up"}, {"name": "pdf-summarizer"}]}`))
	got, err := recaller(t, srv, time.Minute).Recall(context.Background(), "put this into french", skills)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "translate-text" || got[0].Similarity != 0.9 || got[1].Name != "pdf-summarizer" || got[0].Source != selector.SourceLLM {
		t.Fatalf("recall = %+v", got)
	}
	req := srv.Requests()[0]
	sys := req.Messages[0].Content
	if !strings.Contains(sys, "1. pdf-summarizer: Summarize PDF documents.\n2. translate-text: Translate text between languages.") ||
		!strings.Contains(sys, `{"matched_skills": []}`) || req.Messages[1].Content != "put this into french" {
		t.Fatalf("prompt = %s", sys)
	}
}

func TestBadAnswersAreErrors(t *testing.T) {
	t.Parallel()
	for _, reply := range []llmtest.Reply{
		llmtest.Text("I think translate-text fits."),
		llmtest.Text(`{"skills": ["translate-text"]}`),
		llmtest.Text(`{"matched_skills": [{"description": "no name"}]}`),
		llmtest.Error(500, "model overloaded"),
	} {
		srv := llmtest.Script(t, reply)
		if _, err := recaller(t, srv, time.Minute).Recall(context.Background(), "x", skills); err == nil {
			t.Errorf("%+v: no error", reply)
		}
	}
	// A slow model: the caller's deadline ends the wait.
	srv := llmtest.New(t, func(*llmtest.Request) llmtest.Reply { return llmtest.Reply{Wait: true} })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := recaller(t, srv, time.Minute).Recall(ctx, "x", skills); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow model: err = %v", err)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	got, err := llmrecall.Parse("```json\n{\"matched_skills\": [{\"name\": \"a\"}, {\"name\": \"a\"}]}\n```")
	if err != nil || len(got) != 1 || got[0] != "a" {
		t.Fatalf("got %v, %v", got, err)
	}
	if got, err := llmrecall.Parse(`{"matched_skills": []}`); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v %v", got, err)
	}
	for _, bad := range []string{``, `[]`, `{"matched_skills": [{"name": 3}]}`, `{"matched_skills": []} extra`, `{"matched_skills": [], "why": "x"}`} {
		if _, err := llmrecall.Parse(bad); !errors.Is(err, llmrecall.ErrMalformed) {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(`{"matched_skills": [{"name": "a", "description": "b"}]}`)
	f.Add("```json\n{}\n```")
	f.Fuzz(func(t *testing.T, s string) {
		names, err := llmrecall.Parse(s)
		if err != nil {
			return
		}
		for _, n := range names {
			if strings.TrimSpace(n) == "" {
				t.Fatalf("empty name from %q", s)
			}
		}
	})
}
