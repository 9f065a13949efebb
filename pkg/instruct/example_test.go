package instruct_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/skillbus/skillbus/pkg/instruct"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool/llm"
)

func Example() {
	// A stand-in for the model: it reads the guide once, then answers.
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req llm.Request
		_ = json.NewDecoder(r.Body).Decode(&req)
		last := req.Messages[len(req.Messages)-1]
		msg := `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"read_reference","arguments":"{\"path\":\"references/labels.md\"}"}}]}`
		if last.Role == llm.RoleTool {
			msg = `{"role":"assistant","content":"{\"label\": \"bug\"}"}`
		}
		io.WriteString(w, `{"choices":[{"message":`+msg+`}]}`)
	}))
	defer model.Close()

	client, err := llm.New(llm.Config{URL: model.URL, Model: "gpt-4o-mini", Client: model.Client()})
	if err != nil {
		panic(err)
	}
	r, err := instruct.New(instruct.Config{Model: client})
	if err != nil {
		panic(err)
	}
	s := &skill.Skill{
		Name: "triage",
		Body: "Label the ticket with one of the labels in references/labels.md. Answer {\"label\": ...}.",
		Resources: []skill.Resource{
			{Path: "references/labels.md", Kind: skill.ResourceReference, Size: 40, Inline: true},
		},
	}
	res, err := r.Execute(context.Background(), instruct.Run{
		ExecutionID: "e1",
		Skill:       s,
		Inputs:      map[string]any{"title": "Login page crashes"},
		ReadReference: func(ctx context.Context, path string) ([]byte, error) {
			return []byte("bug, feature, question"), nil
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Output, res.Turns, "turns")
	for _, m := range res.Transcript[1:] {
		fmt.Printf("%-9s %s\n", m.Role, strings.TrimSpace(m.Content+" "+calls(m)))
	}
	// Output:
	// map[label:bug] 2 turns
	// user      {"title":"Login page crashes"}
	// assistant read_reference{"path":"references/labels.md"}
	// tool      bug, feature, question
	// assistant {"label": "bug"}
}

func calls(m llm.Message) string {
	var out []string
	for _, c := range m.ToolCalls {
		out = append(out, c.Function.Name+c.Function.Arguments)
	}
	return strings.Join(out, " ")
}
