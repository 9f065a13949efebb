package events

import (
	"encoding/json"
	"time"
)

// TriggerRef identifies the trigger an activation came from, and where it is stored:
// TRIGGERS keeps triggers for days, so Seq is enough to inspect or re-route it.
type TriggerRef struct {
	ID      string `json:"id,omitempty"`
	Source  string `json:"source,omitempty"`
	Type    string `json:"type,omitempty"`
	Subject string `json:"subject"`       // the NATS subject it was published on
	Seq     uint64 `json:"seq,omitempty"` // its sequence in the TRIGGERS stream
}

// SkillRef is one skill of a plan, pinned to the version the plan chose.
type SkillRef struct {
	Name        string  `json:"name"`
	Version     string  `json:"version,omitempty"` // the skill's version, or its digest prefix
	Digest      string  `json:"digest,omitempty"`
	Pool        string  `json:"pool"`
	ExecutionID string  `json:"execution_id"`
	Source      string  `json:"source,omitempty"` // how it was recalled: forced | rule | lexical | semantic | llm | always
	Score       float64 `json:"score,omitempty"`
	// Ramp says which version a version ramp chose for this activation and why
	// ("ramp 10% to 1a2b3c4d5e6f: slot 734 of 10000"); "" when the skill has no ramp.
	Ramp string `json:"ramp,omitempty"`
	// QueuePriority is the seconds the skill's queue_priority gave for this
	// trigger, -600 to 600: its job is queued as if enqueued that much earlier
	// (see Lane). An expression that failed gives 0, and the candidate's reason
	// in the decision says why. (A SkillRef stays within 128 bytes: a map of
	// larger values stores each apart, an allocation per plan.)
	QueuePriority int `json:"queue_priority,omitempty"`
}

// Plan is the activation plan: the primary skill runs first; on fatal
// failure or exhausted retries the job moves along FallbackChain.
type Plan struct {
	Primary        SkillRef   `json:"primary"`
	FallbackChain  []SkillRef `json:"fallback_chain,omitempty"`
	ParallelGroups [][]string `json:"parallel_groups,omitempty"`
	// Always are always-skills that run beside the primary, each as a job of its own.
	Always        []SkillRef     `json:"always,omitempty"`
	EstimatedCost int            `json:"estimated_cost,omitempty"`
	Parameters    map[string]any `json:"parameters,omitempty"`
}

// RouteDecided is the data of io.skillbus.route.decided.
type RouteDecided struct {
	ActivationID string     `json:"activation_id"`
	Trigger      TriggerRef `json:"trigger"`
	Plan         Plan       `json:"plan"`
	// Threshold and Candidates explain the plan: every recalled skill, best first.
	Threshold  float64     `json:"threshold,omitempty"`
	Candidates []Candidate `json:"candidates,omitempty"`
}

// Reasons a trigger is not routed, in RouteUnmatched.Code.
const (
	UnmatchedNoSkill        = "no_skill"        // no skill was recalled, or none scored above the threshold
	UnmatchedUnknownSkill   = "unknown_skill"   // explicit invocation of a skill not in the catalog
	UnmatchedInvalidSkill   = "invalid_skill"   // explicit invocation of a skill whose files never validated; the reason holds the errors
	UnmatchedInvalid        = "invalid_event"   // not a valid CloudEvent (missing id, source, type, specversion, ...)
	UnmatchedTooLarge       = "too_large"       // over the router's size limit
	UnmatchedBadType        = "bad_type"        // the type cannot become a subject, or does not match the subject
	UnmatchedReservedSource = "reserved_source" // a source of skillbus's own (ReservedSource) on a subject senders publish
	UnmatchedFiltered       = "filtered"        // the skills that would have taken it have a filter that is false for it
	UnmatchedFilterError    = "filter_error"    // a skill's filter (or rate-limit key) failed on it: a missing field, a wrong type, the cost limit
	UnmatchedRateLimited    = "rate_limited"    // the skills that would have taken it are over their rate_limit
	UnmatchedDebounced      = "debounced"       // the skills that would have taken it folded it into a debounced run
	UnmatchedBatched        = "batched"         // the skills that would have taken it added it to a batch, which runs as one
)

// Deferred reports whether a route.unmatched code says a skill took the trigger
// into a run that starts later (a debounce's burst, a batch), rather than that no
// skill took it.
func Deferred(code string) bool { return code == UnmatchedDebounced || code == UnmatchedBatched }

// RouteUnmatched is the data of io.skillbus.route.unmatched: a trigger that was not
// routed, terminated, and recorded here with the reason.
type RouteUnmatched struct {
	ActivationID string     `json:"activation_id"`
	Code         string     `json:"code"`
	Reason       string     `json:"reason"`
	Trigger      TriggerRef `json:"trigger"`
	Size         int        `json:"size,omitempty"`
	// Threshold and Candidates (no_skill): the best candidates and their scores.
	Threshold  float64     `json:"threshold,omitempty"`
	Candidates []Candidate `json:"candidates,omitempty"`
	// EndedWaits are the executions whose wait_for_event step the trigger ended:
	// an event sent to resume a waiting run need not be one a skill takes.
	EndedWaits []string `json:"ended_waits,omitempty"`
	// Cancelled are the executions the trigger cancelled by their skills'
	// cancel_on: an event sent to cancel runs need not be one a skill takes.
	Cancelled []string `json:"cancelled,omitempty"`
}

// Attempt records one skill's try in an activation's fallback history.
type Attempt struct {
	Skill       string `json:"skill"`
	ExecutionID string `json:"execution_id"`
	Class       string `json:"class"` // retryable | fatal | repairable
	Error       string `json:"error"`
	Deliveries  uint64 `json:"deliveries"`
}

// Job is the data of an io.skillbus.job message on skillbus.exec.<pool>.<skill>: one
// skill execution, carrying what is left of the plan's fallback chain.
type Job struct {
	ExecutionID  string          `json:"execution_id"`
	ActivationID string          `json:"activation_id"`
	Skill        SkillRef        `json:"skill"`
	Inputs       json.RawMessage `json:"inputs,omitempty"` // a JSON object
	Trigger      TriggerRef      `json:"trigger"`
	Fallback     []SkillRef      `json:"fallback,omitempty"` // the rest of the chain, in order
	History      []Attempt       `json:"history,omitempty"`  // skills tried before this one
	// Answers to the execution's confirmations so far, by step id; a job resumed
	// after a human answered carries them.
	Answers map[string]Answer `json:"answers,omitempty"`
	// Depth is how many skills invoked this one through the skill tool (0 for a
	// trigger's own skill).
	Depth int `json:"depth,omitempty"`
	// Repair is set on a job published again by the repair service: the repair it
	// waited for, and whether it was applied (the job then names the repaired
	// version) or declined.
	Repair *JobRepair `json:"repair,omitempty"`
	// Together is set on the jobs of a plan that started several at once (a parallel
	// group, always-skills): for each of those jobs in plan order, the executions that
	// can end it — its own, then its fallbacks'. The worker whose outcome ends the
	// last of them publishes activation.completed. Fallback jobs carry it on.
	Together [][]string `json:"together,omitempty"`
	// Live asks the worker to publish the progress its events level does not persist
	// on the live subjects: the trigger carried the "progress" extension set to
	// "live", because someone follows it.
	Live bool `json:"live,omitempty"`
	// Route is the rest of the routing decision, on the jobs the router publishes for
	// a plan. Those jobs are the activation's record (see Subjects.Exec), so the
	// decision travels in them rather than in a write of its own; Decision rebuilds
	// the route.decided data from such a job. It is the data's last member, and a
	// worker, which has no use for it, skips it (DecodeJobWithoutRoute). Earlier
	// routers put it in the Skillbus-Route header instead (HeaderRoute).
	Route *JobRoute `json:"route,omitempty"`
}

// JobRoute is the routing decision on a job of the plan, besides what the job says
// itself (its skill, its fallback chain, its trigger).
type JobRoute struct {
	// Primary and FallbackChain are set only on a job that is not the primary's
	// (an always-skill or a parallel group's): the primary's job is its own
	// Skill and Fallback.
	Primary        *SkillRef      `json:"primary,omitempty"`
	FallbackChain  []SkillRef     `json:"fallback_chain,omitempty"`
	ParallelGroups [][]string     `json:"parallel_groups,omitempty"`
	Always         []SkillRef     `json:"always,omitempty"`
	EstimatedCost  int            `json:"estimated_cost,omitempty"`
	Parameters     map[string]any `json:"parameters,omitempty"`
	Threshold      float64        `json:"threshold,omitempty"`
	Candidates     []Candidate    `json:"candidates,omitempty"`
}

// Decision rebuilds the routing decision from a job of the plan; ok is false for
// any other job.
func (j *Job) Decision() (d RouteDecided, ok bool) {
	r := j.Route
	if r == nil {
		return RouteDecided{}, false
	}
	plan := Plan{Primary: j.Skill, FallbackChain: j.Fallback, ParallelGroups: r.ParallelGroups,
		Always: r.Always, EstimatedCost: r.EstimatedCost, Parameters: r.Parameters}
	if r.Primary != nil {
		plan.Primary, plan.FallbackChain = *r.Primary, r.FallbackChain
	}
	return RouteDecided{ActivationID: j.ActivationID, Trigger: j.Trigger, Plan: plan, Threshold: r.Threshold, Candidates: r.Candidates}, true
}

// RouteOf is the route a job of d's plan carries: everything but what the job says
// itself when it is the primary's (primary true).
func RouteOf(d RouteDecided, primary bool) *JobRoute {
	r := &JobRoute{ParallelGroups: d.Plan.ParallelGroups, Always: d.Plan.Always, EstimatedCost: d.Plan.EstimatedCost,
		Parameters: d.Plan.Parameters, Threshold: d.Threshold, Candidates: d.Candidates}
	if !primary {
		p := d.Plan.Primary
		r.Primary, r.FallbackChain = &p, d.Plan.FallbackChain
	}
	return r
}

// Answer is a human's (or a timeout's) answer to a confirmation.
type Answer struct {
	Approved bool   `json:"approved"`
	By       string `json:"by,omitempty"` // who answered; "timeout" when nobody did
	Reason   string `json:"reason,omitempty"`
	// Data is what ended a wait_for_event step: the matched event's data (JSON).
	Data json.RawMessage `json:"data,omitempty"`
}

// ExecutionStarted is the data of io.skillbus.execution.started.
type ExecutionStarted struct {
	ExecutionID string          `json:"execution_id"`
	Skill       string          `json:"skill"`
	Version     string          `json:"version,omitempty"`
	Inputs      json.RawMessage `json:"inputs,omitempty"`
	Attempt     uint64          `json:"attempt"` // delivery count of the job, from 1
	Worker      string          `json:"worker,omitempty"`
}

// StepStarted is the data of io.skillbus.step.started.
type StepStarted struct {
	ExecutionID string `json:"execution_id"`
	StepID      string `json:"step_id"`
	StepType    string `json:"step_type"` // tool | compute
	Tool        string `json:"tool,omitempty"`
}

// StepCompleted is the data of io.skillbus.step.completed. It is also the step's
// checkpoint: a redelivered job reads its execution's step.completed and
// step.skipped events back and does not run those steps again.
type StepCompleted struct {
	ExecutionID string  `json:"execution_id"`
	StepID      string  `json:"step_id"`
	Success     bool    `json:"success"`
	Status      string  `json:"status"` // completed, or continued: it failed and on_error: continue let the run go on
	Result      any     `json:"result,omitempty"`
	Error       string  `json:"error,omitempty"` // status continued: the error
	Class       string  `json:"class,omitempty"` // status continued: its failure class
	DurationMS  float64 `json:"duration_ms"`
	Resumed     bool    `json:"resumed,omitempty"` // done by an earlier delivery; its checkpoint was reused
	Cached      bool    `json:"cached,omitempty"`  // the cache answered every tool call
	Calls       int     `json:"calls,omitempty"`   // tool calls made, retries and loop items included
	// SkillRef is the skill version that ran the step (name@digest prefix); a
	// checkpoint of another version is not reused.
	SkillRef string    `json:"skill_ref,omitempty"`
	Attempt  uint64    `json:"attempt"` // the delivery that ran the step
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
}

// StepSkipped is the data of io.skillbus.step.skipped; like step.completed it is the
// step's checkpoint.
type StepSkipped struct {
	ExecutionID string    `json:"execution_id"`
	StepID      string    `json:"step_id"`
	Reason      string    `json:"reason"`
	SkillRef    string    `json:"skill_ref,omitempty"`
	Attempt     uint64    `json:"attempt,omitempty"`
	Finished    time.Time `json:"finished,omitzero"`
}

// StepFailed is the data of io.skillbus.step.failed.
type StepFailed struct {
	ExecutionID string  `json:"execution_id"`
	StepID      string  `json:"step_id"`
	Error       string  `json:"error"`
	Class       string  `json:"class"`
	DurationMS  float64 `json:"duration_ms"`
}

// ExecutionRetrying is the data of io.skillbus.execution.retrying: the job was handed
// back to the broker to be redelivered after Delay.
type ExecutionRetrying struct {
	ExecutionID string  `json:"execution_id"`
	Skill       string  `json:"skill"`
	Attempt     uint64  `json:"attempt"`
	MaxRetries  int     `json:"max_retries"`
	DelayMS     float64 `json:"delay_ms"`
	Error       string  `json:"error"`
}

// ExecutionFallback is the data of io.skillbus.execution.fallback: the skill failed for
// good and the job moved to the next skill of the chain.
type ExecutionFallback struct {
	ExecutionID     string  `json:"execution_id"`
	ActivationID    string  `json:"activation_id,omitempty"`
	Skill           string  `json:"skill"`
	Version         string  `json:"version,omitempty"`
	Next            string  `json:"next"`
	NextExecutionID string  `json:"next_execution_id"`
	StepID          string  `json:"step_id,omitempty"`
	Class           string  `json:"class"`
	Error           string  `json:"error"`
	Attempt         uint64  `json:"attempt,omitempty"`
	DurationMS      float64 `json:"duration_ms,omitempty"`
	Worker          string  `json:"worker,omitempty"`
	// Log is the execution log of the delivery that failed.
	Log json.RawMessage `json:"log,omitempty"`
	// RepairID and Digest: as on ExecutionCompleted.
	RepairID string `json:"repair_id,omitempty"`
	Digest   string `json:"digest,omitempty"`
}

// ExecutionCompleted is the data of io.skillbus.execution.completed.
type ExecutionCompleted struct {
	ExecutionID  string         `json:"execution_id"`
	ActivationID string         `json:"activation_id"`
	Skill        string         `json:"skill"`
	Version      string         `json:"version,omitempty"`
	Outputs      map[string]any `json:"outputs"`
	DurationMS   float64        `json:"duration_ms"`
	Attempt      uint64         `json:"attempt"`
	Worker       string         `json:"worker,omitempty"`
	// Log is the execution log (each step's status, timing and an excerpt of its
	// result) of the delivery that finished.
	Log json.RawMessage `json:"log,omitempty"`
	// RepairID is set on an execution that was parked for a repair and released:
	// the repair, and Digest the skill version it then ran on (Version its version).
	RepairID string `json:"repair_id,omitempty"`
	Digest   string `json:"digest,omitempty"`
}

// ExecutionFailed is the data of io.skillbus.execution.failed: the activation's last
// skill failed and nothing is left to fall back to.
type ExecutionFailed struct {
	ExecutionID  string    `json:"execution_id"`
	ActivationID string    `json:"activation_id"`
	Skill        string    `json:"skill"`
	Version      string    `json:"version,omitempty"`
	StepID       string    `json:"step_id,omitempty"`
	Class        string    `json:"class"`
	Error        string    `json:"error"`
	Attempt      uint64    `json:"attempt"`
	History      []Attempt `json:"history,omitempty"`
	DeadLetter   string    `json:"dead_letter,omitempty"` // subject of the DLQ entry
	// Denied is set when a person denied the run: nothing falls back and nothing is
	// dead-lettered.
	Denied     bool    `json:"denied,omitempty"`
	DurationMS float64 `json:"duration_ms,omitempty"`
	Worker     string  `json:"worker,omitempty"`
	// Log is the execution log of the delivery that failed.
	Log json.RawMessage `json:"log,omitempty"`
	// RepairID and Digest: as on ExecutionCompleted — the repair the execution
	// waited for (applied, or declined) and the skill version it ended on.
	RepairID string `json:"repair_id,omitempty"`
	Digest   string `json:"digest,omitempty"`
}

// ExecutionCancelled is the data of io.skillbus.execution.cancelled: someone
// cancelled the execution (skillbus runs cancel, the console). It is the
// execution's outcome: nothing falls back and nothing is dead-lettered.
type ExecutionCancelled struct {
	ExecutionID  string `json:"execution_id"`
	ActivationID string `json:"activation_id"`
	Skill        string `json:"skill"`
	Version      string `json:"version,omitempty"`
	// By and Reason are who cancelled it and why, as they gave them; Requested is
	// when.
	By        string    `json:"by"`
	Reason    string    `json:"reason,omitempty"`
	Requested time.Time `json:"requested"`
	// Started is false for an execution cancelled before it ran a step: queued,
	// waiting for a retry, or held by a paused skill.
	Started bool `json:"started"`
	// StepID is the step that was running when the cancel arrived, if one was
	// (an exec step's processes were sent SIGTERM, then SIGKILL).
	StepID     string  `json:"step_id,omitempty"`
	Attempt    uint64  `json:"attempt"`
	DurationMS float64 `json:"duration_ms,omitempty"`
	Worker     string  `json:"worker,omitempty"`
	// Log is the execution log of the delivery that stopped, if it ran.
	Log json.RawMessage `json:"log,omitempty"`
}

// ExecutionDeadlettered is the data of io.skillbus.execution.deadlettered.
type ExecutionDeadlettered struct {
	ExecutionID string `json:"execution_id"`
	Skill       string `json:"skill"`
	Subject     string `json:"subject"` // the DLQ subject the job was written to
	Class       string `json:"class"`
	Reason      string `json:"reason"`
}

// DeadLetter is the data of a DLQ entry: the job as it was, and why it died. Replaying
// it means publishing Job again to its exec subject.
type DeadLetter struct {
	Job        Job    `json:"job"`
	Class      string `json:"class"`
	Reason     string `json:"reason"`
	StepID     string `json:"step_id,omitempty"`
	Deliveries uint64 `json:"deliveries"`
	Worker     string `json:"worker,omitempty"`
}

// AutohealTriggered is the data of io.skillbus.autoheal.triggered: a step of the
// auto-heal pattern (detect a failure, run the fixing tool, retry) runs to fix what an
// earlier step's failure showed.
type AutohealTriggered struct {
	ExecutionID string `json:"execution_id"`
	StepID      string `json:"step_id"`      // the step that failed
	FailureType string `json:"failure_type"` // what was detected (needs_vpn, ...), when known
	Action      string `json:"action"`       // the healing step's tool or id
	HealStep    string `json:"heal_step"`    // the healing step
}

// ConfirmationRequested is the data of io.skillbus.confirmation.requested: the
// execution is paused (no worker holds it) until confirmation.recorded answers it or
// TimeoutAt passes (then the answer is a denial by "timeout").
type ConfirmationRequested struct {
	ExecutionID  string    `json:"execution_id"`
	ActivationID string    `json:"activation_id"`
	Skill        string    `json:"skill"`
	StepID       string    `json:"step_id"`
	Message      string    `json:"message"`
	Default      bool      `json:"default"`
	TimeoutAt    time.Time `json:"timeout_at"`
}

// ConfirmationRecorded is the data of io.skillbus.confirmation.recorded, published by
// `skillbus runs confirm` (or any client) on the execution's events subject; the
// router resumes the paused job with the answer.
type ConfirmationRecorded struct {
	ExecutionID string `json:"execution_id"`
	StepID      string `json:"step_id"`
	Answer
}

// WaitEnded is the data of io.skillbus.wait.ended: a step that parked its execution
// without holding a worker is done waiting. By says what ended it: "sleep" (the
// message scheduler published it at the wake-up time), "event" (a router matched
// an event of a wait_for_event) or "timeout" (the scheduler published it at a
// wait_for_event's deadline). The router resumes the parked job with it, as it
// does with a ConfirmationRecorded, whose shape it shares.
type WaitEnded struct {
	ExecutionID string `json:"execution_id"`
	StepID      string `json:"step_id"`
	Answer
	// EventType is the type of event a wait_for_event step waits for (By "event"
	// or "timeout").
	EventType string `json:"event_type,omitempty"`
}

// ExecutionWaiting is the data of io.skillbus.execution.waiting: a run was set
// aside, holding no worker, until a slot of its skill's keyed concurrency frees
// (For "concurrency"; Detail: the limit and its key). It is published live only,
// for whoever follows the activation (trigger --wait): the run then starts as any
// run does, with execution.started.
type ExecutionWaiting struct {
	ExecutionID string `json:"execution_id"`
	Skill       string `json:"skill"`
	For         string `json:"for"`
	Detail      string `json:"detail,omitempty"`
}

// ThrottleDue is the data of io.skillbus.throttle.due: a throttled run that was set
// aside to wait for its start time (At) is due. It is published by the message
// scheduler at that time, to the second and never after At; a worker then
// publishes the run's job again.
type ThrottleDue struct {
	ExecutionID string    `json:"execution_id"`
	At          time.Time `json:"at"`
}

// DLQReplayed is the data of io.skillbus.dlq.replayed: a dead-letter entry was
// published again as a new attempt (`skillbus dlq replay`). It is written to the DLQ
// stream beside the entry, so the record lasts as long as the entry does, and to the
// new execution's (or activation's) events, so its history says where it came from.
type DLQReplayed struct {
	// EntryID names the dead-letter entry: the dead execution's id, or
	// "trigger.<seq>" for a trigger the router rejected.
	EntryID string `json:"entry_id"`
	// EntrySeq is the entry's sequence in the DLQ stream.
	EntrySeq uint64 `json:"entry_seq"`
	// Replay numbers the replays of one entry from 1; with EntryID it determines the
	// new ids, so the same replay requested twice runs once.
	Replay int `json:"replay"`
	// Skill is the skill the job was published for; empty for a trigger, which the
	// router routes again.
	Skill string `json:"skill,omitempty"`
	// ExecutionID is the new execution (a job); ActivationID the activation it belongs
	// to: the dead job's own, or the replayed trigger's new one.
	ExecutionID  string `json:"execution_id,omitempty"`
	ActivationID string `json:"activation_id"`
	// TriggerID is the CloudEvents id the replayed trigger was published with.
	TriggerID string `json:"trigger_id,omitempty"`
	// Version and Digest are the skill version the new job runs; Pinned says it is
	// the dead job's own version rather than the catalog's current one.
	Version string `json:"version,omitempty"`
	Digest  string `json:"digest,omitempty"`
	Pinned  bool   `json:"pinned,omitempty"`
	// Subject is where the job or trigger was published.
	Subject string `json:"subject"`
	// By is who asked for the replay; At is when.
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// JobRepair is what a job resumed after a repair carries.
type JobRepair struct {
	ID string `json:"id"` // the repair
	// BudgetKey identifies the skill and fault across versions; Attempts is how many
	// repairs of it this execution went through.
	BudgetKey string `json:"budget_key"`
	Attempts  int    `json:"attempts"`
	// Declined, when set, is why no repair came (rejected, expired, out of budget,
	// no proposal): the execution fails as it would have without repair.
	Declined string `json:"declined,omitempty"`
	Step     string `json:"step,omitempty"`
	Error    string `json:"error,omitempty"`
	Class    string `json:"class,omitempty"`
	// From is the digest of the version the execution failed on, when the repair was
	// applied: the worker reuses the checkpoints of the steps before Step that the
	// repair left alone, instead of running them again.
	From string `json:"from,omitempty"`
}

// RepairFault is the fault a repair is about (see package failure's Fault).
type RepairFault struct {
	Kind  string   `json:"kind"` // parameter | path | reference | unknown_filter
	Name  string   `json:"name,omitempty"`
	Have  []string `json:"have,omitempty"`
	Value string   `json:"value,omitempty"`
	Field string   `json:"field,omitempty"`
	Step  string   `json:"step,omitempty"`
	File  string   `json:"file,omitempty"`
	Line  int      `json:"line,omitempty"`
}

// RepairRequested is the data of io.skillbus.repair.requested, on the execution's
// events subject: the execution failed with a repairable fault and is parked
// (no worker holds it) until the repair RepairID ends. Waiting is set when another
// execution had asked for that repair already.
type RepairRequested struct {
	ExecutionID string      `json:"execution_id"`
	Skill       string      `json:"skill"`
	Version     string      `json:"version,omitempty"`
	Digest      string      `json:"digest"`
	RepairID    string      `json:"repair_id"`
	Fault       RepairFault `json:"fault"`
	Error       string      `json:"error"`
	Waiting     bool        `json:"waiting,omitempty"`
}

// RepairProposed is the data of io.skillbus.repair.proposed, on the repair's events
// subject (skillbus.events.<repair id>.repair.proposed): a patch waits for approval
// until ExpiresAt, unless Auto says it is applied without one.
type RepairProposed struct {
	RepairID  string    `json:"repair_id"`
	Skill     string    `json:"skill"`
	Digest    string    `json:"digest"`
	Diff      string    `json:"diff"`
	By        string    `json:"by"` // the repairer: reference, filter, path, parameter, chat
	Summary   string    `json:"summary"`
	Files     int       `json:"files"`
	Hunks     int       `json:"hunks"`
	Attempt   int       `json:"attempt"`
	Auto      bool      `json:"auto,omitempty"`
	ExpiresAt time.Time `json:"expires_at"`
}

// RepairDecided is the data of io.skillbus.repair.decided: a person (or the skill's
// repair: auto, or the timeout) approved or rejected a proposed repair. It is
// published on the repair stream, where the repair workers act on it.
type RepairDecided struct {
	RepairID string `json:"repair_id"`
	Skill    string `json:"skill"`
	Approved bool   `json:"approved"`
	By       string `json:"by,omitempty"` // who; "auto" or "timeout" when nobody did
	Reason   string `json:"reason,omitempty"`
}

// RepairProgress is the data of io.skillbus.repair.attempted, .succeeded, .failed,
// .no_improvement and .skipped, on the repair's events subject (or, for skipped and
// no_improvement, the execution's).
type RepairProgress struct {
	RepairID    string `json:"repair_id,omitempty"`
	ExecutionID string `json:"execution_id,omitempty"`
	Skill       string `json:"skill"`
	Attempt     int    `json:"attempt,omitempty"`
	By          string `json:"by,omitempty"`
	// Digest and Version (succeeded): the repaired version the parked executions
	// run again on; Executions is how many.
	Digest     string `json:"digest,omitempty"`
	Version    string `json:"version,omitempty"`
	Executions int    `json:"executions,omitempty"`
	Reason     string `json:"reason,omitempty"`
}
