package repair

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/skillbus/skillbus/pkg/tool/llm"
)

// Chatter sends one chat-completions request; *llm.Client implements it.
type Chatter interface {
	Chat(ctx context.Context, req llm.Request) (*llm.Response, error)
}

// Chat is the chat-model repairer: it sends the skill's files, the diagnosis and
// the error to a model speaking the OpenAI chat-completions protocol and reads a
// unified diff back, strictly (see ParseDiff).
type Chat struct {
	Model Chatter
	// Timeout bounds one request; default 60s.
	Timeout time.Duration
	// MaxFileBytes bounds each file sent; longer files are cut. Default 32 KiB.
	MaxFileBytes int
}

func (*Chat) Name() string { return "chat" }

// ChatPrompt is the system prompt of the chat-model repairer.
const ChatPrompt = `You repair skills of skillbus. A skill is a directory of files (SKILL.md, skill.yaml, scripts, references).
An execution of the skill failed with a repairable fault. You get the fault, the error, what the failing step saw, and the skill's files.
Answer with ONE unified diff and nothing else: "--- a/<path>" and "+++ b/<path>" headers, then hunks with exact context lines.
Change only existing files, change as little as possible, do not create, delete or rename files.
If you cannot fix it, answer exactly: NO FIX`

// Propose asks the model.
func (c *Chat) Propose(ctx context.Context, d *Diagnosis, files Files) (string, string, error) {
	if c.Model == nil {
		return "", "", ErrNoProposal
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	temp := 0.0
	resp, err := c.Model.Chat(ctx, llm.Request{
		Messages:    []llm.Message{{Role: llm.RoleSystem, Content: ChatPrompt}, {Role: llm.RoleUser, Content: c.prompt(d, files)}},
		Temperature: &temp,
	})
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return "", "", fmt.Errorf("repair: chat model: no answer within %s", timeout)
		}
		return "", "", fmt.Errorf("repair: chat model: %w", err)
	}
	if strings.TrimSpace(resp.Message.Content) == "NO FIX" {
		return "", "", ErrNoProposal
	}
	// Only line breaks are trimmed from the end: a last context line of a blank line
	// is a single space, which the hunk counts.
	answer := strings.TrimLeft(strings.TrimRight(resp.Message.Content, "\r\n"), " \t\r\n")
	if _, _, err := ParseDiff(answer, files); err != nil {
		return "", "", err
	}
	return unfence(answer), "the chat model's patch", nil
}

func (c *Chat) prompt(d *Diagnosis, files Files) string {
	limit := c.MaxFileBytes
	if limit <= 0 {
		limit = 32 << 10
	}
	fault, _ := json.MarshalIndent(d.Fault, "", "  ")
	var b strings.Builder
	fmt.Fprintf(&b, "Skill: %s (version %s)\n\nFault:\n%s\n\nError:\n%s\n", d.Skill, d.Version, fault, d.Error)
	if len(d.Seen) > 0 {
		fmt.Fprintf(&b, "\nWhat the failing step saw:\n%s\n", d.Seen)
	}
	for _, p := range files.Paths() {
		text := files[p]
		if len(text) > limit {
			text = text[:limit] + "\n… (cut)"
		}
		fmt.Fprintf(&b, "\n=== %s ===\n%s", p, text)
		if !strings.HasSuffix(text, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}
