package skill

import (
	"encoding/json"
	"fmt"
	"math"
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

// DefaultMaxRetries is how often a retryable failure is retried.
const DefaultMaxRetries = 3

// DefaultTimeout bounds one execution of a skill.
const DefaultTimeout = 30 * time.Second

// Defaults filled in by the parser when a skill leaves the field out.
const (
	DefaultPriority   = "medium"
	DefaultCostHint   = "medium"
	DefaultSandbox    = SandboxProcess
	DefaultApproval   = ApprovalAuto // ask would park every run until a human answers; see doc.go
	DefaultEntrypoint = "default"    // the entrypoint a script skill runs unless told otherwise
)

// Skill is the compiled, validated form of a skill: what the registry publishes to
// the catalog and what routers and workers hold in memory. Fields are the union of
// SKILL.md front matter and skill.yaml. The parser fills in the documented defaults
// (see the Default constants and doc.go); on a Skill built by hand, zero values mean
// "not set" and the accessors (Retries, ExecTimeout, PoolName) apply the defaults.
type Skill struct {
	Name          string         `json:"name"`
	Description   string         `json:"description"`
	Version       string         `json:"version,omitempty"`
	Kind          Kind           `json:"kind"`
	Type          string         `json:"type,omitempty"` // free-text category (self-improvement, mode, custom, ...)
	Author        string         `json:"author,omitempty"`
	License       string         `json:"license,omitempty"`
	Compatibility string         `json:"compatibility,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`

	// Routing.
	Triggers []string `json:"triggers,omitempty"` // CloudEvent types (exact match) that activate the skill; also matched as phrases in the request text
	// TriggerPhrases are the triggers entries that cannot be CloudEvent types (they
	// hold spaces or punctuation): words and phrases matched in the request text only.
	TriggerPhrases []string `json:"trigger_phrases,omitempty"`
	AntiTriggers   []string `json:"anti_triggers,omitempty"` // phrases that argue against activation
	Tags           []string `json:"tags,omitempty"`
	Examples       Examples `json:"examples,omitzero"`
	Priority       string   `json:"priority,omitempty"`  // high | medium | low; default medium
	CostHint       string   `json:"cost_hint,omitempty"` // low | medium | high; default medium
	Always         bool     `json:"always,omitempty"`
	ParallelSafe   bool     `json:"parallel_safe,omitempty"`
	Capabilities   []string `json:"capabilities,omitempty"` // what the skill or subagent can do
	// Schedule, when set, runs the skill on each of its ticks without an event.
	Schedule *Schedule `json:"schedule,omitempty"`
	// Filter is a CEL expression over the trigger (see package flow): the skill
	// takes a trigger only when it is true.
	Filter string `json:"filter,omitempty"`
	// RateLimit bounds how often the skill runs across the fleet.
	RateLimit *RateLimit `json:"rate_limit,omitempty"`
	// Debounce folds bursts of triggers into one run.
	Debounce *Debounce `json:"debounce,omitempty"`
	// Batch gathers triggers into one run of all of them.
	Batch *Batch `json:"batch,omitempty"`
	// CancelOn are events that cancel a run of the skill.
	CancelOn []CancelOn `json:"cancel_on,omitempty"`
	// QueuePriority is a CEL expression over the trigger giving -600 to 600
	// seconds: the skill's runs are queued in their pool as if enqueued that
	// much earlier. Not Priority, which orders routing candidates.
	QueuePriority string `json:"queue_priority,omitempty"`

	// Availability and safety.
	Prerequisites []Prerequisite  `json:"prerequisites,omitempty"`
	Permissions   Permissions     `json:"permissions,omitzero"`
	Execution     ExecutionPolicy `json:"execution,omitzero"`

	// Execution.
	Dependencies    []string `json:"dependencies,omitempty"`
	AllowedTools    []string `json:"allowed_tools,omitempty"` // Agent Skills "allowed-tools"
	RequiredTools   []string `json:"required_tools,omitempty"`
	DisallowedTools []string `json:"disallowed_tools,omitempty"`
	Cacheable       bool     `json:"cacheable,omitempty"`
	MaxRetries      *int     `json:"max_retries,omitempty"` // nil: DefaultMaxRetries
	Timeout         Duration `json:"timeout,omitempty"`     // 0: DefaultTimeout
	Pool            string   `json:"pool,omitempty"`        // "": DefaultPool, or a pool of its own with MaxConcurrent
	MaxConcurrent   int      `json:"max_concurrent,omitempty"`
	// Concurrency bounds the runs of each key value at once, fleet-wide.
	Concurrency []Concurrency `json:"concurrency,omitempty"`
	// Throttle bounds how fast the skill's runs start, fleet-wide; runs beyond it wait.
	Throttle    *Throttle    `json:"throttle,omitempty"`
	Entrypoints []Entrypoint `json:"entrypoints,omitempty"`
	Workflow    *Workflow    `json:"workflow,omitempty"`
	// Repair is how a repairable failure of the skill is repaired: RepairApprove
	// (default) proposes a patch and waits for a person, RepairAuto applies it,
	// RepairOff never repairs.
	Repair string `json:"repair,omitempty"`

	// Provenance.
	Source    string     `json:"source,omitempty"`    // the main file: SKILL.md, else skill.yaml, else the single file
	Dir       string     `json:"dir,omitempty"`       // the skill directory; "" for a single-file skill
	Digest    string     `json:"digest,omitempty"`    // sha256 of the skill's files, hex (see Digest in doc.go)
	Body      string     `json:"body,omitempty"`      // SKILL.md body (instructions)
	BodyLine  int        `json:"body_line,omitempty"` // line of Source where Body starts
	Resources []Resource `json:"resources,omitempty"` // files of the skill directory besides SKILL.md and skill.yaml
	// RepairedBy names the repair whose approved patch made this version.
	RepairedBy string `json:"repaired_by,omitempty"`
	// Invalid is set by the registry on the catalog's current entry of a skill
	// whose files are invalid now: the entry is its last good version, which
	// keeps serving, and Invalid is the first error of its files. "" otherwise;
	// never part of a kept version.
	Invalid string `json:"invalid,omitempty"`
}

// Repair modes of a skill.
const (
	RepairApprove = "approve"
	RepairAuto    = "auto"
	RepairOff     = "off"
)

// Prerequisite is something that must hold for a skill to be available:
// an environment variable, a command on PATH, a tool served by the fleet, a file.
type Prerequisite struct {
	Kind        PrerequisiteKind `json:"kind"`
	Name        string           `json:"name"`
	Description string           `json:"description,omitempty"`
}

// PrerequisiteKind is what a Prerequisite checks.
type PrerequisiteKind string

// The kinds of prerequisite, written in skill files as `- env: GITHUB_TOKEN` and so on.
const (
	PrerequisiteEnv     PrerequisiteKind = "env"
	PrerequisiteCommand PrerequisiteKind = "command"
	PrerequisiteTool    PrerequisiteKind = "tool"
	PrerequisiteFile    PrerequisiteKind = "file"
)

// Permissions is what a skill's sandbox grants. The zero
// value grants nothing.
type Permissions struct {
	Filesystem  FilesystemPermissions  `json:"filesystem,omitzero"`
	Network     NetworkPermissions     `json:"network,omitzero"`
	Environment EnvironmentPermissions `json:"environment,omitzero"`
	Limits      LimitPermissions       `json:"limits,omitzero"`
}

// LimitPermissions tighten the resource limits of a skill's exec processes.
// Zero fields keep the worker's; a limit above the worker's fails the step,
// fatally, on that worker.
type LimitPermissions struct {
	Processes int      `json:"processes,omitempty"`  // processes and threads of one exec call at once
	OpenFiles int      `json:"open_files,omitempty"` // open files of each process
	CPU       Duration `json:"cpu,omitempty"`        // CPU time of each process, in whole seconds
	Memory    int64    `json:"memory,omitempty"`     // address space of each process, bytes
	Output    int64    `json:"output,omitempty"`     // bytes of stdout, and of stderr, kept
}

// FilesystemPermissions lists paths a skill may read and write.
type FilesystemPermissions struct {
	Read  []string `json:"read,omitempty"`
	Write []string `json:"write,omitempty"`
}

// NetworkPermissions says whether a skill may open outbound connections.
type NetworkPermissions struct {
	Outbound bool `json:"outbound,omitempty"`
}

// EnvironmentPermissions lists environment variables passed to a skill.
type EnvironmentPermissions struct {
	Allow []string `json:"allow,omitempty"`
}

// ExecutionPolicy is how a skill runs. Its timeout is Skill.Timeout.
type ExecutionPolicy struct {
	Sandbox  string `json:"sandbox,omitempty"`  // none | process | container; default process
	Approval string `json:"approval,omitempty"` // auto | ask; default auto
}

// Sandboxes and approval modes of an ExecutionPolicy.
const (
	SandboxNone      = "none"
	SandboxProcess   = "process"
	SandboxContainer = "container"
	ApprovalAuto     = "auto" // run without asking
	ApprovalAsk      = "ask"  // a human confirms before the skill runs
)

// Resource is a file of a skill directory other than SKILL.md and skill.yaml:
// scripts/, references/, assets/ or anything else. Resources are listed, never
// inlined into the catalog; Inline says whether one may be shown to a model as text.
type Resource struct {
	Path   string       `json:"path"` // slash-separated, relative to the skill directory
	Kind   ResourceKind `json:"kind"`
	Size   int64        `json:"size"`
	Binary bool         `json:"binary,omitempty"` // holds a NUL byte or is not UTF-8
	Inline bool         `json:"inline,omitempty"` // text, and within LoadOptions.MaxFileSize
	SHA256 string       `json:"sha256"`
}

// ResourceKind is the role of a resource, from its top-level directory.
type ResourceKind string

// Resource kinds.
const (
	ResourceScript    ResourceKind = "script"    // scripts/
	ResourceReference ResourceKind = "reference" // references/
	ResourceAsset     ResourceKind = "asset"     // assets/
	ResourceOther     ResourceKind = "other"     // anything else
)

// Examples are trigger phrases used by routing evals.
type Examples struct {
	Positive []string `json:"positive,omitempty"`
	Negative []string `json:"negative,omitempty"`
}

// Entrypoint is a script a script skill can run.
type Entrypoint struct {
	Name        string   `json:"name"`
	Command     []string `json:"command"` // program and arguments; the script it runs lies inside the skill directory
	Description string   `json:"description,omitempty"`
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

// PoolName is the worker pool whose jobs subject the skill's jobs go to. A skill with
// max_concurrent gets a pool of its own ("solo-<name>"), so that one consumer's
// MaxAckPending enforces the limit across the whole fleet; the workers of its
// BasePool serve that pool.
func (s *Skill) PoolName() string {
	if s.MaxConcurrent > 0 {
		return SoloPool(s.Name)
	}
	return s.BasePool()
}

// BasePool is the pool whose workers run the skill: the one it names, or "default".
func (s *Skill) BasePool() string {
	if s.Pool != "" {
		return s.Pool
	}
	return DefaultPool
}

// SoloPool is the pool of a skill with max_concurrent.
func SoloPool(name string) string { return soloPoolPrefix + name }

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

// Workflow is a skill.yaml: typed inputs, steps, outputs and confirmations.
type Workflow struct {
	Source        string         `json:"source,omitempty"` // the file the workflow came from; Step.Line is a line of it
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
	Pattern     string `json:"pattern,omitempty"`    // Go regexp (RE2) the value must match
	MaxLength   int    `json:"max_length,omitempty"` // 0: no limit
	Description string `json:"description,omitempty"`
}

// Step is one workflow step. Exactly one of Tool, Compute, Sleep, SleepUntil and
// WaitForEvent is set.
type Step struct {
	ID            string         `json:"id"`
	Description   string         `json:"description,omitempty"`
	Tool          string         `json:"tool,omitempty"`
	Args          map[string]any `json:"args,omitempty"` // values may hold {{ templates }}
	Compute       string         `json:"compute,omitempty"`
	Condition     string         `json:"condition,omitempty"`
	Loop          string         `json:"loop,omitempty"`
	LoopVar       string         `json:"loop_var,omitempty"`
	Output        string         `json:"output,omitempty"`
	OnError       string         `json:"on_error,omitempty"` // fail (default) | continue | retry:N
	Timeout       Duration       `json:"timeout,omitempty"`
	ParallelGroup string         `json:"parallel_group,omitempty"` // written as a number or a string
	DependsOn     []string       `json:"depends_on,omitempty"`
	Cache         Duration       `json:"cache,omitempty"` // TTL of the cached result; 0: not cached
	// Sleep parks the run for this long without holding a worker.
	Sleep Duration `json:"sleep,omitempty"`
	// SleepUntil is a template giving an RFC 3339 time the run is parked until.
	SleepUntil string `json:"sleep_until,omitempty"`
	// WaitForEvent parks the run until an event matches, without holding a worker.
	WaitForEvent *WaitForEvent `json:"wait_for_event,omitempty"`
	Line         int           `json:"line,omitempty"` // line of the step in Workflow.Source, for messages
	// ComputeLine is the line of Workflow.Source where Compute's first line is,
	// for a run-time error's place in the file; 0 if unknown.
	ComputeLine int `json:"compute_line,omitempty"`
}

// ErrorPolicy splits OnError into its policy (fail, continue or retry) and, for
// retry, the number of retries.
func (s Step) ErrorPolicy() (policy string, retries int) {
	switch {
	case s.OnError == "":
		return "fail", 0
	case strings.HasPrefix(s.OnError, "retry:"):
		n, err := strconv.Atoi(strings.TrimPrefix(s.OnError, "retry:"))
		if err != nil {
			return "fail", 0
		}
		return "retry", n
	}
	return s.OnError, 0
}

// Output is one named workflow output; Value may hold {{ templates }}.
type Output struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
}

// Confirmation asks a human before a step runs.
type Confirmation struct {
	Step    string   `json:"step"`
	Message string   `json:"message"`
	Default bool     `json:"default,omitempty"`
	Timeout Duration `json:"timeout,omitempty"`
}

// Duration is a time.Duration written in skill files as a number of seconds
// (`timeout: 30`) or a Go duration string ("1m30s"), and in JSON as a string.
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

// ParseSize reads a number of bytes: a whole number (1048576), or a number with
// a binary (KiB, MiB, GiB, TiB) or decimal (kB, MB, GB, TB) unit: 512MiB, 1.5GB.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	num := strings.TrimRightFunc(t, func(r rune) bool { return r >= 'A' && r <= 'z' })
	unit := strings.TrimSpace(t[len(num):])
	mult, ok := map[string]float64{"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
		"kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[unit]
	f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if !ok || err != nil || math.IsNaN(f) {
		return 0, fmt.Errorf("size %q: want bytes (1048576) or a number with a unit (512MiB, 2GB)", s)
	}
	if f < 0 {
		return 0, fmt.Errorf("size %q is negative", s)
	}
	if f*mult >= 1<<62 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(f * mult), nil
}

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
