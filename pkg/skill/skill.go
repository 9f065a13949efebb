package skill

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kind says which executor runs a skill.
type Kind string

const (
	// KindWorkflow skills have a skill.yaml with steps; the workflow engine runs them.
	KindWorkflow Kind = "workflow"
	// KindInstruction skills are a SKILL.md body used as a chat model's system prompt.
	KindInstruction Kind = "instruction"
	// KindScript skills run one of their entrypoints as a sandboxed process.
	KindScript Kind = "script"
)

// DefaultPool is the worker pool a skill runs in unless it names another.
const DefaultPool = "default"

// DefaultMaxRetries is how often a retryable failure is retried (seed 000's default).
const DefaultMaxRetries = 3

// DefaultTimeout bounds one execution of a skill (seed 000's timeout_ms default).
const DefaultTimeout = 30 * time.Second

// Skill is the compiled, validated form of a skill: what the registry publishes to
// the catalog and what routers and workers hold in memory. Fields are the union of
// the seeds' front matter and skill.yaml; zero values mean "not set" and the
// documented defaults apply (see Defaults).
type Skill struct {
	Name          string         `json:"name"`
	Description   string         `json:"description"`
	Version       string         `json:"version,omitempty"`
	Kind          Kind           `json:"kind"`
	Type          string         `json:"type,omitempty"` // seed 000's category (self-improvement, mode, custom, ...)
	Author        string         `json:"author,omitempty"`
	License       string         `json:"license,omitempty"`
	Compatibility string         `json:"compatibility,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`

	// Routing.
	Triggers     []string `json:"triggers,omitempty"`      // CloudEvent types (exact match) that activate the skill
	AntiTriggers []string `json:"anti_triggers,omitempty"` // phrases that argue against activation
	Tags         []string `json:"tags,omitempty"`
	Examples     Examples `json:"examples,omitzero"`
	Priority     string   `json:"priority,omitempty"`  // high | medium | low; default medium
	CostHint     string   `json:"cost_hint,omitempty"` // low | medium | high; default medium
	Always       bool     `json:"always,omitempty"`
	ParallelSafe bool     `json:"parallel_safe,omitempty"`

	// Execution.
	Dependencies    []string     `json:"dependencies,omitempty"`
	AllowedTools    []string     `json:"allowed_tools,omitempty"` // Agent Skills "allowed-tools"
	RequiredTools   []string     `json:"required_tools,omitempty"`
	DisallowedTools []string     `json:"disallowed_tools,omitempty"`
	Cacheable       bool         `json:"cacheable,omitempty"`
	MaxRetries      *int         `json:"max_retries,omitempty"` // nil: DefaultMaxRetries
	Timeout         Duration     `json:"timeout,omitempty"`     // 0: DefaultTimeout
	Pool            string       `json:"pool,omitempty"`        // "": DefaultPool, or a pool of its own with MaxConcurrent
	MaxConcurrent   int          `json:"max_concurrent,omitempty"`
	Entrypoints     []Entrypoint `json:"entrypoints,omitempty"`
	Workflow        *Workflow    `json:"workflow,omitempty"`

	// Provenance.
	Source string `json:"source,omitempty"` // the file the skill was loaded from
	Digest string `json:"digest,omitempty"` // sha256 of the skill's files, hex
	Body   string `json:"body,omitempty"`   // SKILL.md body (instructions)
}

// Examples are trigger phrases used by routing evals.
type Examples struct {
	Positive []string `json:"positive,omitempty"`
	Negative []string `json:"negative,omitempty"`
}

// Entrypoint is a script a script skill can run (seed 001).
type Entrypoint struct {
	Name    string   `json:"name"`
	Command []string `json:"command"`
}

// Retries is MaxRetries with its default applied.
func (s *Skill) Retries() int {
	if s.MaxRetries == nil {
		return DefaultMaxRetries
	}
	return *s.MaxRetries
}

// ExecTimeout is Timeout with its default applied.
func (s *Skill) ExecTimeout() time.Duration {
	if s.Timeout <= 0 {
		return DefaultTimeout
	}
	return time.Duration(s.Timeout)
}

// PoolName is the worker pool that runs the skill. A skill with max_concurrent and no
// pool gets a pool of its own, so that one consumer's MaxAckPending enforces the limit
// across the whole fleet.
func (s *Skill) PoolName() string {
	switch {
	case s.Pool != "":
		return s.Pool
	case s.MaxConcurrent > 0:
		return "solo-" + s.Name
	default:
		return DefaultPool
	}
}

// Ref is the pinned name@version of the skill, the version being its digest when it
// declares none.
func (s *Skill) Ref() string {
	v := s.Version
	if v == "" && len(s.Digest) >= 12 {
		v = s.Digest[:12]
	}
	if v == "" {
		return s.Name
	}
	return s.Name + "@" + v
}

// Workflow is seed 004's skill.yaml: typed inputs, steps, outputs and confirmations.
type Workflow struct {
	Inputs        []Input        `json:"inputs,omitempty"`
	Steps         []Step         `json:"steps"`
	Outputs       []Output       `json:"outputs,omitempty"`
	Confirmations []Confirmation `json:"confirmations,omitempty"`
}

// Input is one typed workflow input.
type Input struct {
	Name        string `json:"name"`
	Type        string `json:"type,omitempty"` // string | integer | number | boolean | array | object; default string
	Required    bool   `json:"required,omitempty"`
	Default     any    `json:"default,omitempty"`
	Enum        []any  `json:"enum,omitempty"`
	Pattern     string `json:"pattern,omitempty"`
	MaxLength   int    `json:"max_length,omitempty"`
	Description string `json:"description,omitempty"`
}

// Step is one workflow step. Exactly one of Tool and Compute is set.
type Step struct {
	ID            string         `json:"id"`
	Tool          string         `json:"tool,omitempty"`
	Args          map[string]any `json:"args,omitempty"` // values may hold {{ templates }}
	Compute       string         `json:"compute,omitempty"`
	Condition     string         `json:"condition,omitempty"`
	Loop          string         `json:"loop,omitempty"`
	LoopVar       string         `json:"loop_var,omitempty"`
	Output        string         `json:"output,omitempty"`
	OnError       string         `json:"on_error,omitempty"` // fail (default) | continue | retry:N
	Timeout       Duration       `json:"timeout,omitempty"`
	ParallelGroup string         `json:"parallel_group,omitempty"`
	DependsOn     []string       `json:"depends_on,omitempty"`
	Cache         Duration       `json:"cache,omitempty"`
	Line          int            `json:"line,omitempty"` // line of the step in its file, for messages
}

// Output is one named workflow output; Value may hold {{ templates }}.
type Output struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
}

// Confirmation asks a human before a step runs (seed 004).
type Confirmation struct {
	Step    string   `json:"step"`
	Message string   `json:"message"`
	Default bool     `json:"default,omitempty"`
	Timeout Duration `json:"timeout,omitempty"`
}

// Duration is a time.Duration written in skill files as a number of seconds (seed
// 004's `timeout: 30`) or a Go duration string ("1m30s"), and in JSON as a string.
type Duration time.Duration

// ParseDuration reads a number of seconds or a Go duration string.
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f < 0 {
			return 0, fmt.Errorf("duration %q is negative", s)
		}
		return Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: want seconds (30) or a Go duration (1m30s)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return Duration(d), nil
}

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a Go duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var f float64
		if err := json.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("duration: want a string or a number of seconds, got %s", b)
		}
		s = strconv.FormatFloat(f, 'f', -1, 64)
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}
