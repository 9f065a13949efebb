package workflow

import (
	"sync"
	"time"

	"github.com/skillbus/skillbus/pkg/skill"
)

// Observer is told about each step as it happens; the worker turns the calls into
// step events.
//
// Steps may run concurrently, but the engine serialises its calls: no two Observer
// methods (including the optional ones below) run at the same time, so an
// implementation needs no locking. Calls come from the engine's goroutines, not
// always the one that called Execute, and the step waits for the call to return.
// For one step the calls come in the order started → completed or failed; a skipped
// step gets only StepSkipped. A step starts only after every step it waits for has
// been reported, so the calls follow the order of the DAG; steps that run at the
// same time interleave.
type Observer interface {
	// StepStarted reports that a step's body is about to run; kind is tool or
	// compute.
	StepStarted(st *skill.Step, kind string)
	// StepCompleted reports a step that finished; err is set when the step failed and
	// on_error: continue let the run go on.
	StepCompleted(st *skill.Step, result any, err error, d time.Duration)
	// StepSkipped reports a step that did not run: its condition was false ("condition
	// is false: ..."), a human denied it ("denied by alice"), or — when the Observer
	// is not a ResumeObserver — it was done in an earlier attempt.
	StepSkipped(st *skill.Step, reason string)
	// StepFailed reports a step whose failure ends the run.
	StepFailed(st *skill.Step, err error, d time.Duration)
}

// ResumeObserver is an Observer that wants to know which steps a run did not run
// because a checkpoint says they were done in an earlier attempt. Without it, such
// steps are reported with StepSkipped(st, ReasonResumed).
type ResumeObserver interface {
	StepResumed(st *skill.Step, c Checkpoint)
}

// ReasonResumed is the StepSkipped reason of a step found in a checkpoint, for
// Observers that are not ResumeObservers.
const ReasonResumed = "done in an earlier attempt"

// CacheObserver is an Observer that wants to know when a step's tool calls were
// answered by the cache. StepCached comes just before StepCompleted; hits is how many
// of the step's calls the cache answered (a loop step makes one call per item).
type CacheObserver interface {
	StepCached(st *skill.Step, hits int)
}

// AutoHealObserver is an Observer that wants to know when a step of the auto-heal
// pattern runs (see AutoHeal). AutoHealTriggered comes just before the healing step's
// StepStarted.
type AutoHealObserver interface {
	AutoHealTriggered(h AutoHeal)
}

// NopObserver ignores everything.
type NopObserver struct{}

func (NopObserver) StepStarted(*skill.Step, string)                      {}
func (NopObserver) StepCompleted(*skill.Step, any, error, time.Duration) {}
func (NopObserver) StepSkipped(*skill.Step, string)                      {}
func (NopObserver) StepFailed(*skill.Step, error, time.Duration)         {}

// syncObserver serialises the calls to the run's Observer.
type syncObserver struct {
	mu     sync.Mutex
	o      Observer
	resume ResumeObserver
	cache  CacheObserver
	heal   AutoHealObserver
}

// init sets s up to serialise o's calls; s is a field of the execution, which
// saves the run an allocation.
func (s *syncObserver) init(o Observer) *syncObserver {
	if o == nil {
		o = NopObserver{}
	}
	s.o = o
	s.resume, _ = o.(ResumeObserver)
	s.cache, _ = o.(CacheObserver)
	s.heal, _ = o.(AutoHealObserver)
	return s
}

func (s *syncObserver) started(st *skill.Step, kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.o.StepStarted(st, kind)
}

func (s *syncObserver) completed(st *skill.Step, result any, err error, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.o.StepCompleted(st, result, err, d)
}

func (s *syncObserver) skipped(st *skill.Step, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.o.StepSkipped(st, reason)
}

func (s *syncObserver) failed(st *skill.Step, err error, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.o.StepFailed(st, err, d)
}

func (s *syncObserver) resumed(st *skill.Step, c Checkpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resume != nil {
		s.resume.StepResumed(st, c)
		return
	}
	s.o.StepSkipped(st, ReasonResumed)
}

func (s *syncObserver) cached(st *skill.Step, hits int) {
	if s.cache == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cache.StepCached(st, hits)
}

func (s *syncObserver) autoHeal(h AutoHeal) {
	if s.heal == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.heal.AutoHealTriggered(h)
}
