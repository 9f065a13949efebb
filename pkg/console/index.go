package console

import (
	"encoding/json"
	"sort"
	"sync"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/run"
)

// States of a run as the console shows it.
const (
	StateQueued    = "queued"    // routed; no worker has reported on it yet
	StateRunning   = "running"   // a worker reported a start or a step
	StateRetrying  = "retrying"  // handed back to the broker, to be redelivered
	StatePaused    = "paused"    // waiting for a person's confirmation
	StateRepairing = "repairing" // parked until a repair of its skill is decided
	StateCompleted = "completed" // terminal
	StateFailed    = "failed"    // terminal
	StateFallback  = "fallback"  // terminal for this skill; the next of the chain took over
	StateCancelled = "cancelled" // terminal: someone cancelled it
)

// States lists every state, in the order the console shows their counts.
var States = []string{StateQueued, StateRunning, StateRetrying, StatePaused, StateRepairing, StateCompleted, StateFailed, StateFallback, StateCancelled}

func terminal(state string) bool {
	return state == StateCompleted || state == StateFailed || state == StateFallback || state == StateCancelled
}

// Run is one execution as the runs list shows it.
type Run struct {
	ExecutionID  string
	ActivationID string
	Skill        string
	Version      string
	State        string
	TriggerType  string
	Error        string
	Attempt      uint64
	DurationMS   float64
	// Prev is the execution this one took over from by fallback; Next the one
	// that took over from it.
	Prev, Next string
	Started    time.Time // when the console first saw it (its routing decision, mostly)
	Updated    time.Time

	ord uint64 // position in the index: newest has the highest
}

// Filter selects runs; its zero value selects every run.
type Filter struct {
	Skill string
	State string
	Since time.Time // started at or after; zero: no bound
	Until time.Time // started before; zero: no bound
}

func (f Filter) match(r *Run) bool {
	return (f.Skill == "" || r.Skill == f.Skill) && (f.State == "" || r.State == f.State) &&
		(f.Since.IsZero() || !r.Started.Before(f.Since)) && (f.Until.IsZero() || r.Started.Before(f.Until))
}

// IndexConfig configures an Index.
type IndexConfig struct {
	// MaxRuns bounds the runs kept; the oldest are forgotten first. Default 100,000
	// (roughly 40 MB).
	MaxRuns int
}

// Index holds the runs the console shows, newest first, built from the events of
// the EVENTS stream. It is bounded: past MaxRuns the oldest runs are forgotten
// (their events stay in the stream, and a run's own page reads them from there).
// Every method is safe for concurrent use.
type Index struct {
	mu   sync.RWMutex
	max  int
	byID map[string]*Run
	// runs holds the runs in the order they were first seen; runs[i].ord == base+i.
	// Forgotten runs are nil until the slice is compacted.
	runs []*Run
	head int
	base uint64
}

// NewIndex returns an empty index.
func NewIndex(cfg IndexConfig) *Index {
	if cfg.MaxRuns <= 0 {
		cfg.MaxRuns = 100_000
	}
	return &Index{max: cfg.MaxRuns, byID: make(map[string]*Run)}
}

// Get returns a copy of a run, or false.
func (x *Index) Get(id string) (Run, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	r, ok := x.byID[id]
	if !ok {
		return Run{}, false
	}
	return *r, true
}

// Apply updates the index with one event of type typ and JSON data, stored at at.
// It returns the execution ids whose row changed. Events it cannot read are
// ignored: the console shows what it understands and never stops on bad data.
func (x *Index) Apply(typ string, data []byte, at time.Time) []string {
	switch typ {
	case events.TypeRouteDecided:
		var d struct {
			ActivationID string            `json:"activation_id"`
			Trigger      events.TriggerRef `json:"trigger"`
			Plan         struct {
				Primary events.SkillRef   `json:"primary"`
				Always  []events.SkillRef `json:"always"`
			} `json:"plan"`
		}
		if json.Unmarshal(data, &d) != nil {
			return nil
		}
		x.mu.Lock()
		defer x.mu.Unlock()
		var changed []string
		for _, ref := range append([]events.SkillRef{d.Plan.Primary}, d.Plan.Always...) {
			if ref.ExecutionID == "" {
				continue
			}
			r := x.upsert(ref.ExecutionID, at)
			r.ActivationID, r.TriggerType = d.ActivationID, d.Trigger.Type
			setIf(&r.Skill, ref.Name)
			setIf(&r.Version, ref.Version)
			changed = append(changed, r.ExecutionID)
		}
		return changed
	}
	var d struct {
		ExecutionID     string  `json:"execution_id"`
		ActivationID    string  `json:"activation_id"`
		Skill           string  `json:"skill"`
		Version         string  `json:"version"`
		Attempt         uint64  `json:"attempt"`
		Error           string  `json:"error"`
		Reason          string  `json:"reason"`
		By              string  `json:"by"`
		DurationMS      float64 `json:"duration_ms"`
		Next            string  `json:"next"`
		NextExecutionID string  `json:"next_execution_id"`
	}
	if json.Unmarshal(data, &d) != nil || d.ExecutionID == "" {
		return nil
	}
	state := ""
	switch typ {
	case events.TypeExecutionStarted, events.TypeStepStarted, events.TypeStepCompleted, events.TypeStepSkipped, events.TypeStepFailed, events.TypeAutohealTriggered:
		state = StateRunning
	case events.TypeExecutionRetrying:
		state = StateRetrying
	case events.TypeConfirmationRequested:
		state = StatePaused
	case events.TypeRepairRequested:
		state = StateRepairing
	case events.TypeConfirmationRecorded:
		state = StateQueued
	case events.TypeExecutionCompleted:
		state = StateCompleted
	case events.TypeExecutionFailed:
		state = StateFailed
	case events.TypeExecutionFallback:
		state = StateFallback
	case events.TypeExecutionCancelled:
		state = StateCancelled
	case events.TypeExecutionDeadlettered:
		state = StateFailed
	default:
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	r := x.upsert(d.ExecutionID, at)
	setIf(&r.ActivationID, d.ActivationID)
	setIf(&r.Skill, d.Skill)
	setIf(&r.Version, d.Version)
	if d.Attempt > r.Attempt {
		r.Attempt = d.Attempt
	}
	switch {
	case terminal(r.State) && !terminal(state):
		// A late progress event does not reopen a finished run.
	case typ == events.TypeConfirmationRecorded && r.State != StatePaused:
	default:
		r.State = state
	}
	switch typ {
	case events.TypeExecutionCompleted, events.TypeExecutionFailed, events.TypeExecutionFallback:
		r.Error, r.DurationMS = d.Error, d.DurationMS
	case events.TypeExecutionCancelled:
		r.Error, r.DurationMS = run.CancelText(d.By, d.Reason), d.DurationMS
	case events.TypeExecutionDeadlettered:
		setIf(&r.Error, d.Reason)
	case events.TypeExecutionRetrying:
		r.Error = d.Error
	}
	changed := []string{r.ExecutionID}
	if typ == events.TypeExecutionFallback && d.NextExecutionID != "" {
		r.Next = d.NextExecutionID
		n := x.upsert(d.NextExecutionID, at)
		n.Prev, n.ActivationID, n.TriggerType = r.ExecutionID, r.ActivationID, r.TriggerType
		setIf(&n.Skill, d.Next)
		changed = append(changed, n.ExecutionID)
	}
	return changed
}

func setIf(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

// upsert returns the run of id, adding it as queued when new. x.mu is held.
func (x *Index) upsert(id string, at time.Time) *Run {
	if r, ok := x.byID[id]; ok {
		r.Updated = at
		return r
	}
	r := &Run{ExecutionID: id, State: StateQueued, Started: at, Updated: at, ord: x.base + uint64(len(x.runs))}
	x.runs = append(x.runs, r)
	x.byID[id] = r
	for len(x.byID) > x.max {
		old := x.runs[x.head]
		delete(x.byID, old.ExecutionID)
		x.runs[x.head] = nil
		x.head++
	}
	if x.head > 1024 && x.head > len(x.runs)/2 {
		n := copy(x.runs, x.runs[x.head:])
		clear(x.runs[n:])
		x.runs = x.runs[:n]
		x.base += uint64(x.head)
		x.head = 0
	}
	return r
}

// Page is one page of the runs list.
type Page struct {
	Runs []Run
	// Before is the cursor of the next (older) page: pass it as Query's before;
	// 0 when this is the last page.
	Before uint64
}

// Query returns up to limit runs matching f, newest first, starting below the
// cursor before (0: from the newest). It scans at most the whole index once, so a
// page costs the same however deep it is.
func (x *Index) Query(f Filter, before uint64, limit int) Page {
	if limit <= 0 {
		limit = 50
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	i := len(x.runs) - 1
	if before > 0 {
		if before <= x.base {
			return Page{}
		}
		i = min(i, int(before-x.base)-1)
	}
	var p Page
	for ; i >= x.head; i-- {
		r := x.runs[i]
		if !f.match(r) {
			continue
		}
		if len(p.Runs) == limit {
			p.Before = r.ord + 1
			break
		}
		p.Runs = append(p.Runs, *r)
	}
	return p
}

// Counts returns how many runs matching f (its State ignored) are in each state.
func (x *Index) Counts(f Filter) map[string]int {
	f.State = ""
	var n [9]int // by stateIndex
	x.mu.RLock()
	for _, r := range x.runs[x.head:] {
		if f.Skill != "" || !f.Since.IsZero() || !f.Until.IsZero() {
			if !f.match(r) {
				continue
			}
		}
		n[stateIndex(r.State)]++
	}
	x.mu.RUnlock()
	out := make(map[string]int, len(States))
	for i, s := range States {
		if n[i] > 0 {
			out[s] = n[i]
		}
	}
	return out
}

func stateIndex(s string) int {
	switch s {
	case StateQueued:
		return 0
	case StateRunning:
		return 1
	case StateRetrying:
		return 2
	case StatePaused:
		return 3
	case StateRepairing:
		return 4
	case StateCompleted:
		return 5
	case StateFailed:
		return 6
	case StateFallback:
		return 7
	}
	return 8
}

// Runs returns copies of the runs of ids that the index holds, newest first.
func (x *Index) Runs(ids []string) []Run {
	x.mu.RLock()
	out := make([]Run, 0, len(ids))
	for _, id := range ids {
		if r, ok := x.byID[id]; ok {
			out = append(out, *r)
		}
	}
	x.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ord > out[j].ord })
	return out
}

// Skills returns the skills the index has seen, sorted.
func (x *Index) Skills() []string {
	seen := map[string]bool{}
	x.mu.RLock()
	for _, r := range x.runs[x.head:] {
		seen[r.Skill] = true
	}
	x.mu.RUnlock()
	out := make([]string, 0, len(seen))
	for s := range seen {
		if s != "" {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// VersionStats counts the finished runs of one skill version.
type VersionStats struct {
	Skill, Version              string
	Completed, Failed, Fallback int
}

// SuccessRate is the share of finished runs that completed, 0 to 1.
func (v VersionStats) SuccessRate() float64 {
	n := v.Completed + v.Failed + v.Fallback
	if n == 0 {
		return 0
	}
	return float64(v.Completed) / float64(n)
}

// Finished is how many runs of the version finished.
func (v VersionStats) Finished() int { return v.Completed + v.Failed + v.Fallback }

// Stats returns the finished runs per skill version, by skill then version.
func (x *Index) Stats() []VersionStats {
	type key struct{ s, v string }
	m := map[key]*VersionStats{}
	x.mu.RLock()
	for _, r := range x.runs[x.head:] {
		if !terminal(r.State) {
			continue
		}
		k := key{r.Skill, r.Version}
		v := m[k]
		if v == nil {
			v = &VersionStats{Skill: r.Skill, Version: r.Version}
			m[k] = v
		}
		switch r.State {
		case StateCompleted:
			v.Completed++
		case StateFailed:
			v.Failed++
		case StateFallback:
			v.Fallback++
		}
	}
	x.mu.RUnlock()
	out := make([]VersionStats, 0, len(m))
	for _, v := range m {
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Skill != out[j].Skill {
			return out[i].Skill < out[j].Skill
		}
		return out[i].Version < out[j].Version
	})
	return out
}
