package workflow

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/skillbus/skillbus/pkg/failure"
)

// Run statuses of a Log.
const (
	RunCompleted = "completed"
	RunFailed    = "failed"
	RunPaused    = "paused"
	// RunCancelled: someone cancelled the run (Cancel); Error says who and why.
	RunCancelled = "cancelled"
)

// Log is the execution log of one attempt at a run (its "memory"): what
// happened to every step, in list order. The worker stores it in KV runs and
// `skillbus runs show` prints it with Format. It is JSON-serialisable.
type Log struct {
	ExecutionID string    `json:"execution_id"`
	Skill       string    `json:"skill"`
	Version     string    `json:"version,omitempty"`
	Attempt     uint64    `json:"attempt"`
	Status      string    `json:"status"` // RunCompleted, RunFailed, RunPaused or RunCancelled
	Started     time.Time `json:"started"`
	Finished    time.Time `json:"finished"`
	DurationMS  float64   `json:"duration_ms"`
	// FailedStep, Error and Class describe a failed run; FailedStep is empty when
	// no step failed (invalid inputs, a missing tool, ...).
	FailedStep string        `json:"failed_step,omitempty"`
	Error      string        `json:"error,omitempty"`
	Class      failure.Class `json:"class,omitempty"`
	// Waiting is the step a paused run waits at (SkillApproval for the skill).
	Waiting string    `json:"waiting,omitempty"`
	Steps   []StepLog `json:"steps"`
}

// StepLog is what happened to one step.
type StepLog struct {
	ID         string    `json:"id"`
	Kind       string    `json:"kind"` // tool | compute
	Tool       string    `json:"tool,omitempty"`
	Status     Status    `json:"status"`
	Reason     string    `json:"reason,omitempty"` // why it was skipped, is waiting or did not run
	Started    time.Time `json:"started,omitzero"`
	Finished   time.Time `json:"finished,omitzero"`
	DurationMS float64   `json:"duration_ms,omitempty"`
	// Result is the start of the result's JSON, at most ExcerptBytes.
	Result string        `json:"result,omitempty"`
	Error  string        `json:"error,omitempty"`
	Class  failure.Class `json:"class,omitempty"`
	// Attempt is the attempt that ran the step: earlier than the log's own for a
	// resumed step.
	Attempt uint64 `json:"attempt,omitempty"`
	// Resumed: the step was done in an earlier attempt and its checkpoint reused.
	Resumed bool `json:"resumed,omitempty"`
	// Calls is how many tool calls the step made (retries and loop items included);
	// CacheHits how many the cache answered; Cached that it answered all.
	Calls     int  `json:"calls,omitempty"`
	CacheHits int  `json:"cache_hits,omitempty"`
	Cached    bool `json:"cached,omitempty"`
	// HealOf and FailureType: the step healed this failed step (see AutoHeal).
	HealOf      string `json:"heal_of,omitempty"`
	FailureType string `json:"failure_type,omitempty"`
	// RetryOf: the step retried this failed step's tool after an auto-heal.
	RetryOf string `json:"retry_of,omitempty"`
}

// ExcerptBytes bounds StepLog.Result.
const ExcerptBytes = 200

func (sl *StepLog) set(s Status, start, fin time.Time) {
	sl.Status, sl.Started, sl.Finished = s, start, fin
	sl.DurationMS = ms(fin.Sub(start))
}

func (sl *StepLog) fromCheckpoint(ck Checkpoint) {
	sl.set(ck.Status, ck.Started, ck.Finished)
	sl.Resumed, sl.Attempt = true, ck.Attempt
	sl.Reason, sl.Error, sl.Class = ck.Reason, ck.Error, ck.Class
	sl.Calls, sl.Cached = ck.Calls, ck.Cached
	if ck.Status == StatusCompleted {
		sl.Result = excerpt(ck.Result)
	}
}

func (l *Log) end(err error) {
	l.Finished = time.Now()
	l.DurationMS = ms(l.Finished.Sub(l.Started))
	if err == nil {
		l.Status = RunCompleted
		return
	}
	var p *PausedError
	if errors.As(err, &p) {
		l.Status, l.Waiting = RunPaused, p.Step
		return
	}
	l.Status, l.Error, l.Class = RunFailed, err.Error(), failure.ClassOf(err)
	var se *StepError
	if errors.As(err, &se) {
		l.FailedStep = se.Step
	}
}

// Cancel marks the run as cancelled rather than failed: why says who cancelled it
// and why ("cancelled by ada: wrong customer"). The step the cancel cut short, if
// any, stays named.
func (l *Log) Cancel(why string) {
	l.Status, l.Error, l.Class, l.Waiting = RunCancelled, why, "", ""
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Format writes the log for people:
//
//	start_work 1.0 · execution 7f3a… · attempt 2 · completed · steps 12.1ms
//	  get_issue              tool jira_view_issue    completed  1.2ms  resumed from attempt 1 → {"key":"AAP-1"}
//	  fix_vpn                tool vpn_connect        completed  0.3ms  auto-heal of create_branch (needs_vpn)
//	  fix_auth               tool kube_login         skipped           condition is false: ...
func Format(w io.Writer, l *Log) error {
	head := l.Skill
	if l.Version != "" {
		head += " " + l.Version
	}
	head += " · execution " + l.ExecutionID
	if l.Attempt > 0 {
		head += fmt.Sprintf(" · attempt %d", l.Attempt)
	}
	switch l.Status {
	case RunPaused:
		head += " · paused at " + l.Waiting + ", " + l.waitingFor()
	case RunFailed:
		head += " · failed"
		if l.FailedStep != "" {
			head += " at step " + l.FailedStep
		}
		head += fmt.Sprintf(" (%s): %s", l.Class, oneLine(l.Error, 300))
	case RunCancelled:
		head += " · " + oneLine(l.Error, 300)
		if l.FailedStep != "" {
			head += " (at step " + l.FailedStep + ")"
		}
	default:
		head += " · " + l.Status
	}
	head += " · steps " + fmtMS(l.DurationMS)
	if _, err := fmt.Fprintln(w, head); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, s := range l.Steps {
		what := s.Kind
		if s.Tool != "" {
			what += " " + s.Tool
		}
		d := ""
		if s.Status == StatusCompleted || s.Status == StatusContinued || s.Status == StatusFailed && s.DurationMS > 0 {
			d = fmtMS(s.DurationMS)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", s.ID, what, s.Status, d, s.detail())
	}
	return tw.Flush()
}

func (s *StepLog) detail() string {
	var parts []string
	if s.Resumed {
		parts = append(parts, fmt.Sprintf("resumed from attempt %d", s.Attempt))
	}
	if s.Cached {
		parts = append(parts, "cached")
	} else if s.CacheHits > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d calls cached", s.CacheHits, s.CacheHits+s.Calls))
	}
	if s.Calls > 1 {
		parts = append(parts, fmt.Sprintf("%d calls", s.Calls))
	}
	if s.HealOf != "" {
		parts = append(parts, fmt.Sprintf("auto-heal of %s (%s)", s.HealOf, s.FailureType))
	}
	if s.RetryOf != "" {
		parts = append(parts, "retry of "+s.RetryOf)
	}
	if s.Reason != "" {
		parts = append(parts, oneLine(s.Reason, 120))
	}
	if s.Error != "" {
		parts = append(parts, fmt.Sprintf("%s: %s", s.Class, oneLine(s.Error, 200)))
	}
	if s.Result != "" {
		parts = append(parts, "→ "+oneLine(s.Result, 120))
	}
	return strings.Join(parts, " · ")
}

func oneLine(s string, n int) string {
	return truncate(strings.Join(strings.Fields(s), " "), n)
}

func fmtMS(v float64) string {
	d := time.Duration(v * float64(time.Millisecond))
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// waitingFor says what the step a paused run waits at waits for.
func (l *Log) waitingFor() string {
	for _, s := range l.Steps {
		if s.ID == l.Waiting && (strings.HasPrefix(s.Reason, "sleeping until ") || strings.HasPrefix(s.Reason, waitingForEvent)) {
			return s.Reason
		}
	}
	return "waiting for a confirmation"
}
