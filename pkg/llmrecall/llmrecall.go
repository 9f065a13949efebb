// Package llmrecall asks a chat model which skills fit a request: the model gets every
// skill's name and description in a fixed prompt and answers
// {"matched_skills": [{"name": ..., "description": ...}]}. The answer is parsed
// strictly; a timeout, an error or a malformed answer is returned as an error, and the
// router routes with its other recall sources.
package llmrecall

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool/llm"
)

// Chatter sends one chat request; *llm.Client implements it.
type Chatter interface {
	Chat(ctx context.Context, req llm.Request) (*llm.Response, error)
}

// Config configures a Recaller.
type Config struct {
	// Chat is the model; required.
	Chat Chatter
	// MaxSkills bounds the skills listed in the prompt (by name order); 0 means 300.
	// A bigger catalog is listed in part: the keyword index covers it whole.
	MaxSkills int
	// Similarity is what the model's first match counts as, each later one 0.05
	// less (never below 0.6); 0 means 0.9.
	Similarity float64
}

// Recaller is a selector recall source backed by a chat model.
type Recaller struct {
	cfg Config

	mu     sync.Mutex
	key    string
	prompt string
}

// New checks cfg.
func New(cfg Config) (*Recaller, error) {
	if cfg.Chat == nil {
		return nil, errors.New("llmrecall: Chat is required")
	}
	if cfg.MaxSkills == 0 {
		cfg.MaxSkills = 300
	}
	if cfg.Similarity == 0 {
		cfg.Similarity = 0.9
	}
	return &Recaller{cfg: cfg}, nil
}

// Name is the recall source's name.
func (*Recaller) Name() string { return selector.SourceLLM }

// Template is the system prompt; {{SKILL_LIST}} becomes one "N. name: description"
// line per skill.
const Template = `skill-search - Search for matching skills by semantic similarity

ROLE:
    Skill Search Expert - Analyze user query and find semantically matching skills

AVAILABLE SKILLS:
{{SKILL_LIST}}

TASK:
    Given a user query, identify skills that semantically match the intent.
    Consider:
    - Semantic similarity, not just keyword matching
    - The user's underlying goal
    - Skill capabilities described in the description

OUTPUT FORMAT:
    Return JSON only, no additional text:

    When matches found:
        {"matched_skills": [{"name": "skill-name", "description": "..."}]}

    When no matches:
        {"matched_skills": []}

EXAMPLES:
    Query: "help me write unit tests"
    Output: {"matched_skills": [{"name": "testing", "description": "Unit testing utilities"}]}

    Query: "random unrelated topic"
    Output: {"matched_skills": []}
`

// Prompt is the system prompt for skills.
func Prompt(skills []*skill.Skill) string {
	var b strings.Builder
	for i, s := range skills {
		d := strings.Join(strings.Fields(s.Description), " ")
		if d == "" {
			d = "No description"
		}
		fmt.Fprintf(&b, "%d. %s: %s\n", i+1, s.Name, d)
	}
	return strings.Replace(Template, "{{SKILL_LIST}}", strings.TrimRight(b.String(), "\n"), 1)
}

// promptFor caches the prompt while the skills stay the same.
func (r *Recaller) promptFor(skills []*skill.Skill) string {
	if len(skills) > r.cfg.MaxSkills {
		skills = skills[:r.cfg.MaxSkills]
	}
	h := sha256.New()
	for _, s := range skills {
		h.Write([]byte(s.Name + "\x00" + s.Digest + "\x00" + s.Description + "\x00"))
	}
	key := hex.EncodeToString(h.Sum(nil))
	r.mu.Lock()
	defer r.mu.Unlock()
	if key != r.key {
		r.key, r.prompt = key, Prompt(skills)
	}
	return r.prompt
}

// Recall asks the model about text.
func (r *Recaller) Recall(ctx context.Context, text string, skills []*skill.Skill) ([]selector.Recall, error) {
	temp := 0.0
	resp, err := r.cfg.Chat.Chat(ctx, llm.Request{
		Messages:       []llm.Message{{Role: llm.RoleSystem, Content: r.promptFor(skills)}, {Role: llm.RoleUser, Content: text}},
		Temperature:    &temp,
		ResponseFormat: llm.JSONObject,
	})
	if err != nil {
		return nil, fmt.Errorf("llmrecall: %w", err)
	}
	known := make(map[string]bool, len(skills))
	for _, s := range skills {
		known[s.Name] = true
	}
	names, err := Parse(resp.Message.Content)
	if err != nil {
		return nil, err
	}
	var out []selector.Recall
	for i, n := range names {
		if !known[n] {
			continue // a name the catalog does not hold: the model made it up
		}
		sim := r.cfg.Similarity - 0.05*float64(i)
		if sim < 0.6 {
			sim = 0.6
		}
		out = append(out, selector.Recall{Name: n, Source: selector.SourceLLM, Similarity: sim, Reason: fmt.Sprintf("the model's match #%d", i+1)})
	}
	return out, nil
}

// ErrMalformed is an answer that is not {"matched_skills": [{"name": ...}, ...]}.
var ErrMalformed = errors.New("llmrecall: malformed answer")

// Parse reads the model's answer strictly: one JSON object (a ```json fence around
// it is tolerated) with exactly the key matched_skills, a list of objects each with a
// non-empty string name and optionally a string description. It returns the names in
// order, without repeats.
func Parse(content string) ([]string, error) {
	s := strings.TrimSpace(content)
	if strings.HasPrefix(s, "```") {
		s = strings.TrimPrefix(strings.TrimPrefix(s, "```json"), "```")
		s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "```"))
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var ans struct {
		MatchedSkills *[]struct {
			Name        *string `json:"name"`
			Description *string `json:"description"`
		} `json:"matched_skills"`
	}
	if err := dec.Decode(&ans); err != nil {
		return nil, fmt.Errorf("%w: %v in %q", ErrMalformed, err, excerpt(content))
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: text after the JSON object in %q", ErrMalformed, excerpt(content))
	}
	if ans.MatchedSkills == nil {
		return nil, fmt.Errorf("%w: no matched_skills list in %q", ErrMalformed, excerpt(content))
	}
	var out []string
	seen := map[string]bool{}
	for i, m := range *ans.MatchedSkills {
		if m.Name == nil || strings.TrimSpace(*m.Name) == "" {
			return nil, fmt.Errorf("%w: matched_skills[%d] has no name", ErrMalformed, i)
		}
		n := strings.TrimSpace(*m.Name)
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out, nil
}

func excerpt(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}
