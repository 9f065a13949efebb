package workflow

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/skillbus/skillbus/pkg/failure"
)

// Status is what became of a step.
type Status string

// Step statuses. Checkpoints hold only the first three: the others are not final
// (StatusWaiting, StatusNotRun) or end the run (StatusFailed), so a later attempt
// runs the step again.
const (
	StatusCompleted Status = "completed" // ran and returned a result
	StatusContinued Status = "continued" // failed, and on_error: continue let the run go on
	StatusSkipped   Status = "skipped"   // its condition was false, or a human denied it
	StatusFailed    Status = "failed"    // failed; the run fails with it
	StatusWaiting   Status = "waiting"   // needs a confirmation nobody has given yet
	StatusNotRun    Status = "not_run"   // a step it waits for failed or is waiting
)

// Checkpoint is the durable record of a finished step. A run that finds
// a checkpoint for a step does not run it again: it binds Result and goes on.
type Checkpoint struct {
	Status Status `json:"status"`
	// Result is what later steps see under the step's id and output name: the tool's
	// or compute block's result, or for StatusContinued the error text ("❌ ...").
	// Nil for a skipped step. A JSON-like value (see package expr).
	Result any           `json:"result,omitempty"`
	Error  string        `json:"error,omitempty"`  // StatusContinued: the error
	Class  failure.Class `json:"class,omitempty"`  // StatusContinued: its class
	Reason string        `json:"reason,omitempty"` // StatusSkipped: why
	Cached bool          `json:"cached,omitempty"` // every tool call was answered by the cache
	Calls  int           `json:"calls,omitempty"`  // tool calls made, retries and loop items included
	// Skill is the skill version that wrote it (name@digest); checkpoints of another
	// version are ignored, so a changed skill never resumes on stale results.
	Skill    string    `json:"skill,omitempty"`
	Attempt  uint64    `json:"attempt"` // the attempt (job delivery) that ran the step
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`

	// Kind is the step's kind (tool, compute, skill, ...), and Final is set when no
	// other step of the run was left to run when this one finished: the run's outcome
	// follows at once. A store may use them to skip checkpoints a redelivery would
	// not need; they are not stored.
	Kind  string `json:"-"`
	Final bool   `json:"-"`
	// ReadOnly is set when every tool call the step made only read (tool.ReadOnly:
	// an HTTP GET, an echo), or it made none: running it again changes nothing, so a
	// store may skip its checkpoint too. Not stored.
	ReadOnly bool `json:"-"`
}

// Checkpoints stores the checkpoints of executions. The worker implements it over KV
// runs (one key per step, such as "<executionid>.step.<stepid>"); MemStore is an
// in-memory one. Methods may be called from several goroutines at once.
type Checkpoints interface {
	// Load returns every checkpoint of the execution by step id; none is an empty
	// map and a nil error.
	Load(ctx context.Context, executionID string) (map[string]Checkpoint, error)
	// Save stores a step's checkpoint. The engine calls it before any step that
	// depends on this one starts, and before reporting the step to the Observer; a
	// Save error fails the step (and so the run) with the error's class, Retryable
	// when it has none.
	Save(ctx context.Context, executionID, stepID string, c Checkpoint) error
}

// MemStore keeps checkpoints and cached results in memory: for tests, benchmarks and
// single-process use. It implements Checkpoints and Cache and is safe for concurrent
// use. The zero value is ready to use.
type MemStore struct {
	// Now is the clock of cache expiry; nil is time.Now.
	Now func() time.Time

	mu    sync.Mutex
	runs  map[string]map[string]Checkpoint
	cache map[string]memEntry
}

type memEntry struct {
	v       any
	expires time.Time
}

// Load implements Checkpoints.
func (m *MemStore) Load(_ context.Context, executionID string) (map[string]Checkpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.runs[executionID]), nil
}

// Save implements Checkpoints.
func (m *MemStore) Save(_ context.Context, executionID, stepID string, c Checkpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runs == nil {
		m.runs = map[string]map[string]Checkpoint{}
	}
	if m.runs[executionID] == nil {
		m.runs[executionID] = map[string]Checkpoint{}
	}
	m.runs[executionID][stepID] = c
	return nil
}

// Forget removes an execution's checkpoints.
func (m *MemStore) Forget(executionID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.runs, executionID)
}

// Get implements Cache.
func (m *MemStore) Get(_ context.Context, key string) (any, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.cache[key]
	if !ok {
		return nil, false, nil
	}
	if !m.clock().Before(e.expires) {
		delete(m.cache, key)
		return nil, false, nil
	}
	return e.v, true, nil
}

// Put implements Cache.
func (m *MemStore) Put(_ context.Context, key string, v any, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cache == nil {
		m.cache = map[string]memEntry{}
	}
	m.cache[key] = memEntry{v: v, expires: m.clock().Add(ttl)}
	return nil
}

func (m *MemStore) clock() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}
