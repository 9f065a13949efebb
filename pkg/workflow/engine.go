package workflow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/skillbus/skillbus/pkg/expr"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
)

// DefaultMaxParallel is how many steps of one run may run at once unless
// Config.MaxParallel says otherwise.
const DefaultMaxParallel = 8

// Config configures an Engine.
type Config struct {
	// Tools are the tools steps may call; required.
	Tools *tool.Set
	// Log receives debug logs and warnings (a cache that fails); default
	// slog.Default().
	Log *slog.Logger
	// MaxParallel bounds how many steps of one run run at the same time; default
	// DefaultMaxParallel. Negative is an error.
	MaxParallel int
	// Checkpoints, if set, stores every finished step and lets a run resume (see
	// Checkpoints); Run.Checkpoints overrides it. Default none: nothing is saved and
	// every run starts from the first step.
	Checkpoints Checkpoints
	// Cache, if set, keeps the results of steps with cache: TTL; Run.Cache overrides
	// it. Default none: cache: is ignored.
	Cache Cache
	// MaxResultBytes bounds the step results one run holds in memory (every tool
	// call's and compute block's, each loop item's included); a run that would hold
	// more fails fatally with result_too_large before the process is at risk.
	// Default DefaultMaxResultBytes.
	MaxResultBytes int64
}

// DefaultMaxResultBytes is the default of Config.MaxResultBytes.
const DefaultMaxResultBytes = 64 << 20

// Engine runs workflows. It is safe for concurrent use and caches each skill
// version's compiled expressions.
type Engine struct {
	tools       *tool.Set
	log         *slog.Logger
	maxParallel int
	checkpoints Checkpoints
	cache       Cache
	maxResult   int64

	mu       sync.Mutex
	compiled map[compiledKey]*compiled
}

// New returns an Engine.
func New(cfg Config) (*Engine, error) {
	if cfg.Tools == nil {
		return nil, errors.New("workflow: Tools is required")
	}
	if cfg.MaxParallel < 0 {
		return nil, fmt.Errorf("workflow: MaxParallel %d is negative", cfg.MaxParallel)
	}
	if cfg.MaxParallel == 0 {
		cfg.MaxParallel = DefaultMaxParallel
	}
	if cfg.MaxResultBytes < 0 {
		return nil, fmt.Errorf("workflow: MaxResultBytes %d is negative", cfg.MaxResultBytes)
	}
	if cfg.MaxResultBytes == 0 {
		cfg.MaxResultBytes = DefaultMaxResultBytes
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Engine{
		tools: cfg.Tools, log: cfg.Log, maxParallel: cfg.MaxParallel, maxResult: cfg.MaxResultBytes,
		checkpoints: cfg.Checkpoints, cache: cfg.Cache,
		compiled: map[compiledKey]*compiled{},
	}, nil
}

// Run is one execution of a skill, or one attempt at it: running the same
// ExecutionID again with the same Checkpoints resumes it.
type Run struct {
	// Tools, when set, are the tools this run may call instead of Config.Tools: a
	// worker passes the set that includes tools discovered since it started.
	Tools       *tool.Set
	ExecutionID string
	Skill       *skill.Skill
	Inputs      map[string]any
	// OwnInputs says that Inputs are the run's own: the engine may write a
	// default or a converted value (an integer input given as a JSON number) into
	// them rather than copy them first. The caller does not use them again.
	OwnInputs bool
	// Trigger describes the triggering event to expressions as `trigger` (id,
	// source, type, subject, ...). When it is nil, TriggerRef is what they see.
	Trigger map[string]any
	// TriggerRef is the triggering event's id, source, type and subject, made into
	// `trigger` only for a workflow whose expressions read it.
	TriggerRef TriggerRef
	// Attempt is the delivery count of the job, from 1; expressions see it as
	// execution.attempt, and checkpoints and the log record it.
	Attempt  uint64
	Observer Observer
	// Confirmations are the answers to confirmations so far, by step id
	// (SkillApproval for the skill as a whole).
	Confirmations map[string]Answer
	// MaxSleep bounds how far ahead a sleep step may park the run (the worker's
	// wake-up message must outlive it); a longer sleep fails the step. 0: no bound.
	MaxSleep time.Duration
	// Checkpoints and Cache override the Engine's for this run when set.
	Checkpoints Checkpoints
	Cache       Cache
}

// TriggerRef names the event a run answers.
type TriggerRef struct{ ID, Source, Type, Subject string }

// trigger is what expressions see as `trigger`.
func (r *Run) trigger() map[string]any {
	if r.Trigger != nil || r.TriggerRef == (TriggerRef{}) {
		return r.Trigger
	}
	t := r.TriggerRef
	return map[string]any{"id": t.ID, "source": t.Source, "type": t.Type, "subject": t.Subject}
}

// StepError is a failure of one step; its class is the class of Err.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return fmt.Sprintf("step %s: %v", e.Step, e.Err) }
func (e *StepError) Unwrap() error { return e.Err }

// Execute runs the workflow and returns its outputs. Its error is a *StepError for a
// step that failed, a *PausedError when a step waits for a confirmation, or a
// classed error for invalid inputs or skill definitions. See ExecuteLog.
func (e *Engine) Execute(ctx context.Context, r Run) (map[string]any, error) {
	out, _, err := e.ExecuteLog(ctx, r)
	return out, err
}

// ExecuteLog is Execute that also returns the run's execution log, whatever the
// outcome; the log is never nil.
func (e *Engine) ExecuteLog(ctx context.Context, r Run) (map[string]any, *Log, error) {
	f := &frame{}
	l := &f.log
	*l = Log{ExecutionID: r.ExecutionID, Attempt: r.Attempt, Started: time.Now()}
	if r.Skill != nil {
		l.Skill, l.Version = r.Skill.Name, r.Skill.Version
	}
	out, err := e.execute(ctx, r, f)
	l.end(err)
	return out, l, err
}

// frame is what a run allocates for itself, in one allocation: its log, with the
// log's step of a workflow of one step. The log outlives the run (the caller keeps
// it); the run's execution does not and comes from executions.
type frame struct {
	log  Log
	step [1]StepLog
}

// executions holds the executions of finished runs for later runs to reuse. An
// execution is returned only once its run is over: every step goroutine has
// delivered its outcome (run waits for them all) and no closure, error, log or
// outputs map points into it.
var executions = sync.Pool{New: func() any { return new(execution) }}

func (e *Engine) execute(ctx context.Context, r Run, f *frame) (map[string]any, error) {
	l := &f.log
	s := r.Skill
	if s == nil {
		return nil, failure.Fatalf("workflow: Run.Skill is nil")
	}
	if s.Workflow == nil {
		switch s.Kind {
		case skill.KindInstruction:
			return nil, failure.Fatalf("skill %s is an instruction skill and this worker has no chat model configured (start it with --llm-url, or set $SKILLBUS_LLM_URL)", s.Name)
		default:
			return nil, failure.Fatalf("skill %s has no workflow steps and kind %q cannot run on this worker", s.Name, s.Kind)
		}
	}
	tools := r.Tools
	if tools == nil {
		tools = e.tools
	}
	if err := checkTools(s, tools); err != nil {
		return nil, err
	}
	c, err := e.compile(s)
	if err != nil {
		return nil, err
	}
	// The http and exec tools act only as far as the skill's permissions allow.
	ctx = c.permissions(s).On(ctx)
	if len(c.steps) == len(f.step) {
		l.Steps = f.step[:]
	} else {
		l.Steps = make([]StepLog, len(c.steps))
	}
	for i := range c.steps {
		st := c.steps[i].step
		l.Steps[i] = StepLog{ID: st.ID, Kind: c.steps[i].kind, Tool: st.Tool, Status: StatusNotRun}
	}
	inputs, err := validateInputs(c.inputs, r.Inputs, r.OwnInputs)
	if err != nil {
		return nil, err
	}
	if s.Execution.Approval == skill.ApprovalAsk {
		a, ok := r.Confirmations[SkillApproval]
		switch {
		case !ok:
			msg := "Run skill " + s.Name + "?"
			if s.Description != "" {
				msg = "Run skill " + s.Name + " (" + s.Description + ")?"
			}
			return nil, &PausedError{Step: SkillApproval, Message: msg}
		case !a.Approved:
			return nil, failure.Wrap(failure.Fatal, &deniedError{"skill " + s.Name + " was " + a.denial()})
		}
	}
	// The skill's time limit, unless the caller's context already ends by then (a
	// worker sets it on the context it runs the job under, which saves a second
	// context and timer per run).
	if limit := s.ExecTimeout(); !endsWithin(ctx, limit) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, limit, &TimeoutError{Limit: limit, Default: s.Timeout <= 0})
		defer cancel()
	}

	x := executions.Get().(*execution)
	x.e, x.c, x.r, x.ctx, x.log, x.tools, x.final = e, c, r, ctx, l, tools, -1
	x.checkpoints, x.cache = e.checkpoints, e.cache
	x.stop, x.ref = tool.StopFrom(ctx), c.ref
	if x.base == nil {
		x.base = make(expr.Env, 3)
	}
	x.obs = x.sync.init(r.Observer)
	if x.ref == "" {
		x.ref = skillRef(s)
	}
	switch n := len(c.steps); {
	case n == len(x.one):
		x.state = x.one[:]
	case n <= cap(x.spare):
		x.state = x.spare[:n]
	default:
		x.state = make([]stepState, n)
	}
	x.base["inputs"] = inputs
	if c.readsTrigger {
		x.base["trigger"] = r.trigger()
	}
	if c.readsExecution {
		x.base["execution"] = map[string]any{
			"id":      r.ExecutionID,
			"skill":   s.Name,
			"version": s.Version,
			"attempt": int64(r.Attempt),
		}
	}
	if r.Checkpoints != nil {
		x.checkpoints = r.Checkpoints
	}
	if r.Cache != nil {
		x.cache = r.Cache
	}
	out, err := x.finish()
	x.release()
	return out, err
}

// release returns x, its run over, to executions. It is not deferred: after a
// panic the execution may be in use still and is left to the garbage collector.
// The run's names map, step states and outcome channel are kept for the next
// run: nothing holds them but the execution (expressions only read the names;
// outputs hold step values, not the states; the channel is drained, as run
// returns only once every step goroutine's outcome is received).
func (x *execution) release() {
	base, done := x.base, x.done
	clear(base)
	if cap(done) > maxSpareSteps {
		done = nil
	}
	// Spare states are all zero in the pool; a run dirties only its own.
	spare := x.spare
	if n := cap(x.state); n > len(x.one) && n <= maxSpareSteps {
		clear(x.state)
		spare = x.state[:n]
	}
	*x = execution{base: base, spare: spare, done: done}
	executions.Put(x)
}

// maxSpareSteps bounds the step states a pooled execution keeps, so that one
// run of a long workflow does not pin its states for good.
const maxSpareSteps = 64

// endsWithin reports whether ctx has a deadline no later than d from now.
func endsWithin(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return ok && !dl.After(time.Now().Add(d))
}

func skillRef(s *skill.Skill) string {
	if len(s.Digest) >= 12 {
		return s.Name + "@" + s.Digest[:12]
	}
	return s.Ref()
}

// checkTools enforces required_tools, disallowed_tools and allowed-tools before
// anything runs.
func checkTools(s *skill.Skill, tools *tool.Set) error {
	var missing []string
	for _, t := range s.RequiredTools {
		if _, ok := tools.Lookup(t); !ok {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return failure.Fatalf("missing required tools: %s", strings.Join(missing, ", "))
	}
	for _, st := range s.Workflow.Steps {
		if st.Tool == "" {
			continue
		}
		for _, d := range s.DisallowedTools {
			if d == st.Tool {
				return failure.Fatalf("step %s: tool %s is in the skill's disallowed_tools", st.ID, st.Tool)
			}
		}
		if len(s.AllowedTools) > 0 && !contains(s.AllowedTools, st.Tool) {
			return failure.Fatalf("step %s: tool %s is not in the skill's allowed-tools (%s)", st.ID, st.Tool, strings.Join(s.AllowedTools, ", "))
		}
	}
	return nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// compiledKey names a skill version in the engine's cache.
type compiledKey struct{ name, version string }

// compile returns the skill version's compiled workflow, compiling its
// expressions the first time the version is run. A version is its content digest;
// a skill without one (built in code rather than loaded) is keyed by its
// workflow's JSON, so it too is compiled once, not at every run.
func (e *Engine) compile(s *skill.Skill) (*compiled, error) {
	version := s.Digest
	if version == "" {
		b, err := json.Marshal(s.Workflow)
		if err != nil {
			return compile(s.Workflow)
		}
		sum := sha256.Sum256(b)
		version = "json:" + hex.EncodeToString(sum[:])
	}
	key := compiledKey{s.Name, version}
	e.mu.Lock()
	c, ok := e.compiled[key]
	e.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := compile(s.Workflow)
	if err != nil {
		return nil, err
	}
	if len(s.Digest) >= 12 {
		c.ref = skillRef(s) // the key's: its name and digest
	}
	e.mu.Lock()
	if len(e.compiled) >= 4096 {
		clear(e.compiled) // skills change rarely; a full cache means many old versions
	}
	e.compiled[key] = c
	e.mu.Unlock()
	return c, nil
}
