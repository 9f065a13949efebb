package events

import (
	"fmt"
	"strings"
)

// Subjects builds skillbus's subject names (trigger, exec, repair, dead, events, live)
// under a prefix.
type Subjects struct {
	Prefix string
}

// Trigger is the subject of a trigger of CloudEvent type typ: its dots become subject
// tokens. typ must pass CheckType.
func (s Subjects) Trigger(typ string) string { return s.Prefix + ".trigger." + typ }

// TriggerSkill is the subject that invokes the named skill explicitly.
func (s Subjects) TriggerSkill(name string) string { return s.Prefix + ".trigger.skill." + name }

// Triggers matches every trigger.
func (s Subjects) Triggers() string { return s.Prefix + ".trigger.>" }

// TriggerDebounced is the subject a debounced skill's burst runs on when it is
// due: an explicit invocation of the skill, in the trigger stream like any other,
// that only routers may publish (the NATS users of every other role are denied
// TriggersDebounced). A router takes a trigger on it past the skill's debounce;
// on any other subject, whatever its source, a trigger is folded.
func (s Subjects) TriggerDebounced(name string) string {
	return s.Prefix + ".trigger.skill." + name + "." + debouncedToken
}

const debouncedToken = "debounced"

// SourceDebounced begins the source of a debounced burst's run: SourceDebounced
// followed by the skill's name. Triggers skillbus publishes for anyone else may
// not use it (client.CheckEvent), so that no other trigger names its activation.
const SourceDebounced = "/skillbus/debounce/"

// TriggerInternal is the subject of a trigger skillbus itself sends to a skill
// from a source of its own (ReservedSource): a schedule's tick, a skill tool's
// call, a dead letter of those replayed. Only skillbus's own roles (router,
// worker, operator) may publish on it; a router takes a trigger from a reserved
// source on no other subject, so a sender cannot use one of skillbus's
// predictable sources and ids first (see IsReservedSource).
func (s Subjects) TriggerInternal(name string) string {
	return s.Prefix + ".trigger.skill." + name + "." + internalToken
}

const internalToken = "internal"

// SkillFromInternal returns the skill name of a TriggerInternal subject.
func (s Subjects) SkillFromInternal(subject string) (string, bool) {
	if !strings.HasSuffix(subject, "."+internalToken) { // nearly every trigger: no allocation
		return "", false
	}
	return s.SkillFromTrigger(subject[:len(subject)-len(internalToken)-1])
}

// ReservedSource begins the sources of skillbus's own triggers: the scheduler's
// ticks (/skillbus/scheduler), the skill tool's calls (/skillbus/skill-tool), the
// routers' debounced runs (/skillbus/debounce/<skill>). Their ids are predictable
// — a tick's time, a parent execution's step — and an activation is named by
// source and id, so a sender who could use them could run a tick or a child call
// before skillbus does, with its own data, and have skillbus's own taken for a
// duplicate.
const ReservedSource = "/skillbus/"

// reservedIDSource begins the sources skillbus hashes into ids of its own that
// name no trigger: a rejected trigger's record (skillbus:trigger-seq), a dead
// letter's replay (skillbus:dlq/<entry>). A trigger from one would name the same
// activation or execution.
const reservedIDSource = "skillbus:"

// IsReservedSource reports whether source, compared as CloudEvents compares
// sources (percent-decoded, CanonicalSource), begins ReservedSource, or
// "skillbus:", which skillbus's own ids use.
func IsReservedSource(source string) bool {
	if strings.IndexByte(source, '%') >= 0 {
		source = CanonicalSource(source)
	}
	return strings.HasPrefix(source, ReservedSource) || strings.HasPrefix(source, reservedIDSource)
}

// SkillFromDebounced returns the skill name of a TriggerDebounced subject.
func (s Subjects) SkillFromDebounced(subject string) (string, bool) {
	if !strings.HasSuffix(subject, "."+debouncedToken) { // nearly every trigger: no allocation
		return "", false
	}
	name, ok := s.SkillFromTrigger(subject[:len(subject)-len(debouncedToken)-1])
	return name, ok
}

// Exec is the subject of a job: skillbus.exec.<pool>.<skill>.<activation>.<stage>.
//
// The JOBS stream keeps jobs after they run (for as long as it keeps anything), so a
// job's subject names it for good: the jobs of an activation's plan (StagePlan) and
// the next skill of a fallback chain (StageFallback) are published create-only on
// it, and the first such job is the activation's record — a trigger routed again,
// whether redelivered or re-published long after the duplicate window, finds its
// job there and starts nothing new. Jobs published again for the same execution (a
// confirmation answered, a repair released, a dead letter replayed) use stages of
// their own.
func (s Subjects) Exec(pool, skill, activationID, stage string) string {
	if activationID == "" { // not a token; no job the router made lacks one
		activationID = "_"
	}
	return s.Prefix + ".exec." + pool + "." + skill + "." + activationID + "." + stage
}

// AppendExec appends Exec(pool, skill, activationID, stage) to b, for a caller
// that makes one string of the subject and what follows it.
func (s Subjects) AppendExec(b []byte, pool, skill, activationID, stage string) []byte {
	if activationID == "" {
		activationID = "_"
	}
	b = append(append(b, s.Prefix...), ".exec."...)
	b = append(append(b, pool...), '.')
	b = append(append(b, skill...), '.')
	b = append(append(b, activationID...), '.')
	return append(b, stage...)
}

// ExecTemplate is the subject of a job with its activation and stage left out
// (skillbus.exec.<pool>.<skill>.{activation}.{stage}): a name for spans and
// metrics, which must not take a value per activation.
func ExecTemplate(subject string) string {
	if strings.Count(subject, ".") < 5 { // not a job subject: name it as it is
		return subject
	}
	for range 2 {
		if i := strings.LastIndexByte(subject, '.'); i > 0 {
			subject = subject[:i]
		}
	}
	return subject + ".{activation}.{stage}"
}

// PlanJobs matches the jobs of an activation's plan: what the router published for
// it, each carrying the routing decision.
func (s Subjects) PlanJobs(activationID string) string {
	return s.Prefix + ".exec.*.*." + activationID + "." + StagePlan
}

// ActivationJobs matches every job of an activation.
func (s Subjects) ActivationJobs(activationID string) string {
	return s.Prefix + ".exec.*.*." + activationID + ".*"
}

// Job stages, the last token of a job's subject (see Exec).
const (
	// StagePlan: a job of the activation's plan, published by the router.
	StagePlan = "job"
	// StageFallback: the job of the next skill of the chain, after one failed.
	StageFallback = "fallback"
)

// StageAnswered is the stage of a job resumed after a confirmation of step was
// answered.
func StageAnswered(step string) string { return "answered-" + stageToken(step) }

// StageCancelled is the stage of a job published again so that a worker ends an
// execution that no worker holds (paused for a confirmation, held by a paused
// skill, parked for a repair) as cancelled.
const StageCancelled = "cancelled"

// StageResumed is the stage of a job published again when its paused skill was
// resumed.
const StageResumed = "resumed"

// SkillJobs matches every job of a skill, in every pool and activation.
func (s Subjects) SkillJobs(skill string) string { return s.Prefix + ".exec.*." + skill + ".>" }

// StageRepair is the stage of a job released after repair id was decided.
func StageRepair(id string) string { return "repair-" + stageToken(id) }

// StageReplay is the stage of a dead letter's replay, a new execution.
func StageReplay(executionID string) string { return "replay-" + stageToken(executionID) }

// stageToken is s if it is a valid subject token, otherwise a hash of it.
func stageToken(s string) string {
	if CheckToken("stage", s) == nil && len(s) <= 64 {
		return s
	}
	return hash(s)[:16]
}

// ExecPool matches every job of a pool.
func (s Subjects) ExecPool(pool string) string { return s.Prefix + ".exec." + pool + ".>" }

// Repair is the repair-job subject of a skill.
func (s Subjects) Repair(skill string) string { return s.Prefix + ".repair." + skill }

// RepairDecided is the subject of a person's (or the timeout's) decision on a
// proposed repair of a skill: on the repair stream beside the repair jobs, but a
// subject of its own, so that an operator may decide without being able to publish
// repair jobs.
func (s Subjects) RepairDecided(skill string) string {
	return s.Prefix + ".repair." + skill + ".decided"
}

// RepairParked is the subject on which a worker asks the repair service to park an
// execution of a skill on a repair: workers may publish it and no other repair
// subject, so that the repair service alone writes the repairs and their decisions.
func (s Subjects) RepairParked(skill string) string {
	return s.Prefix + ".repair." + skill + ".parked"
}

// IsRepairParked reports whether subject is a RepairParked subject.
func (s Subjects) IsRepairParked(subject string) bool {
	rest, ok := strings.CutPrefix(subject, s.Prefix+".repair.")
	return ok && strings.Count(rest, ".") == 1 && strings.HasSuffix(rest, ".parked")
}

// Dead is the DLQ subject of a skill; "_trigger" holds triggers that never reached one.
func (s Subjects) Dead(skill string) string { return s.Prefix + ".dead." + skill }

// Event is the subject of an event of type typ about an execution (or, for route.*
// events, an activation).
func (s Subjects) Event(id, typ string) string {
	return s.Prefix + ".events." + id + "." + Kind(typ)
}

// DebounceTimer, DebounceLatest and DebounceFired are a debounced burst's
// subjects in the events stream (id: a hash of the skill and its key's value):
// the scheduled message that starts the run, the last trigger folded in, and what
// the server publishes when the timer is due. DebounceFired("*") matches every
// burst's.
func (s Subjects) DebounceTimer(id string) string  { return s.debounce(id, "timer") }
func (s Subjects) DebounceLatest(id string) string { return s.debounce(id, "latest") }
func (s Subjects) DebounceFired(id string) string  { return s.debounce(id, "fired") }

func (s Subjects) debounce(id, part string) string {
	return s.Prefix + ".events." + id + ".debounce." + part
}

// BatchItems, BatchTimer and BatchFired are a batched skill's subjects in the
// events stream for one value of its key (id: a hash of the skill and the
// value): the log of the triggers gathered, each batch's end marked in it; the
// scheduled message that closes the open batch at its timeout; and what the
// server publishes when that timer is due. BatchFired("*") matches every key's.
func (s Subjects) BatchItems(id string) string { return s.batch(id, "items") }
func (s Subjects) BatchTimer(id string) string { return s.batch(id, "timer") }
func (s Subjects) BatchFired(id string) string { return s.batch(id, "fired") }

func (s Subjects) batch(id, part string) string {
	return s.Prefix + ".events." + id + ".batch." + part
}

// ConfirmationTimeout is the subject of the scheduled message that answers a
// confirmation with a denial when nobody answers in time.
func (s Subjects) ConfirmationTimeout(executionID, step string) string {
	if step == "*" { // the whole skill's approval; "*" is a wildcard in subjects
		step = "_skill"
	}
	return s.Prefix + ".events." + executionID + ".confirmation.timeout." + step
}

// WaitTimer is the subject of the scheduled message that ends a step's wait (a
// sleep's wake-up) with an io.skillbus.wait.ended.
func (s Subjects) WaitTimer(executionID, step string) string {
	return s.Prefix + ".events." + executionID + ".wait.timer." + stageToken(step)
}

// Timers match every scheduled message that resumes a parked execution: its
// confirmations' timeouts and its waits' and sleeps' ends.
func (s Subjects) Timers(executionID string) [2]string {
	return [2]string{
		s.Prefix + ".events." + executionID + ".confirmation.timeout.*",
		s.Prefix + ".events." + executionID + ".wait.timer.*",
	}
}

// Kinds of scheduled message of Timers, as TimerOf names them.
const (
	TimerConfirmation = "confirmation.timeout"
	TimerWait         = "wait.timer"
)

// TimerOf says which of an execution's Timers a subject of the events stream is:
// TimerConfirmation, TimerWait, or "" for any other subject. A message on such a
// subject is scheduled, not an event yet: the server publishes a copy on the
// event's own subject when it is due, and then removes it.
func TimerOf(subject string) string {
	i := strings.LastIndex(subject, ".events.")
	if i < 0 {
		return ""
	}
	parts := strings.SplitN(subject[i+len(".events."):], ".", 4)
	if len(parts) != 4 {
		return ""
	}
	switch k := parts[1] + "." + parts[2]; k {
	case TimerConfirmation, TimerWait:
		return k
	}
	return ""
}

// Events matches every event of one execution or activation.
func (s Subjects) Events(id string) string { return s.Prefix + ".events." + id + ".>" }

// Live is the subject of an event of type typ about an execution of an activation
// that is published but not persisted (see events.Level): no stream captures it, so
// only current subscribers see it. The activation id comes first so that a publisher
// can subscribe to everything its trigger sets off before the executions are known.
func (s Subjects) Live(activationID, executionID, typ string) string {
	return s.Prefix + ".live." + activationID + "." + executionID + "." + Kind(typ)
}

// LiveEvents matches every live event of one activation.
func (s Subjects) LiveEvents(activationID string) string {
	return s.Prefix + ".live." + activationID + ".>"
}

// SkillFromTrigger returns the skill name of an explicit-invocation subject.
func (s Subjects) SkillFromTrigger(subject string) (string, bool) {
	p := s.Prefix + ".trigger.skill."
	if !strings.HasPrefix(subject, p) {
		return "", false
	}
	name := subject[len(p):]
	if name == "" || strings.Contains(name, ".") {
		return "", false
	}
	return name, true
}

// TypeFromTrigger returns the event type a trigger subject carries.
func (s Subjects) TypeFromTrigger(subject string) (string, bool) {
	p := s.Prefix + ".trigger."
	if !strings.HasPrefix(subject, p) {
		return "", false
	}
	return subject[len(p):], true
}

// CheckType reports why a CloudEvent type cannot become subject tokens, or nil. Allowed
// are [A-Za-z0-9_.-], no empty token (leading, trailing or doubled dots).
func CheckType(typ string) error {
	if typ == "" {
		return fmt.Errorf("type is empty")
	}
	if len(typ) > 200 {
		return fmt.Errorf("type is %d characters long; at most 200 fit in a subject", len(typ))
	}
	for i := 0; i < len(typ); i++ {
		c := typ[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		case c == '.':
			if i == 0 || i == len(typ)-1 || typ[i-1] == '.' {
				return fmt.Errorf("type %q has an empty subject token (leading, trailing or doubled '.')", typ)
			}
		default:
			return fmt.Errorf("type %q has %q at offset %d; a type becomes NATS subject tokens, so only letters, digits, '_', '-' and '.' are allowed", typ, rune(c), i)
		}
	}
	return nil
}

// CheckToken reports why s cannot be a single subject token (a skill or pool name, a
// prefix), or nil.
func CheckToken(what, s string) error {
	if s == "" {
		return fmt.Errorf("%s is empty", what)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%s %q has %q at offset %d; only letters, digits, '_' and '-' are allowed", what, s, rune(c), i)
		}
	}
	return nil
}

// Names of the NATS micro services skillbus runs, and of the subject token their
// endpoints are under (<prefix>.<service>.<endpoint>).
const (
	ServiceRegistry = "registry"
	ServiceRouter   = "router"
	ServiceWorker   = "worker"
	// ServiceTool is the token tools served on the bus are under
	// (<prefix>.tool.<name>, package bustool).
	ServiceTool = "tool"
)

// Service is the subject group of a micro service's endpoints: <prefix>.<service>.
func (s Subjects) Service(service string) string { return s.Prefix + "." + service }

// ServiceAll matches every endpoint of a micro service: <prefix>.<service>.>.
func (s Subjects) ServiceAll(service string) string { return s.Service(service) + ".>" }

// Worker is the subject group of one worker's endpoints (its status):
// <prefix>.worker.<token>, token being the worker's name as a subject token.
func (s Subjects) Worker(token string) string { return s.Service(ServiceWorker) + "." + token }

// Tool is the subject a tool is served on: <prefix>.tool.<name>.
func (s Subjects) Tool(name string) string { return s.Service(ServiceTool) + "." + name }

// Registry is the subject of an endpoint of the skillbus-registry service (see
// package registryapi).
func (s Subjects) Registry(endpoint string) string {
	return s.Service(ServiceRegistry) + "." + endpoint
}

// Router is the subject of an endpoint of the skillbus-router service
// (RouterEndpointRoute).
func (s Subjects) Router(endpoint string) string { return s.Service(ServiceRouter) + "." + endpoint }

// The DLQ subjects of what is dead before a skill is known (see Subjects.Dead).
const (
	DeadJob     = "_job"     // a job that could not be read
	DeadTrigger = "_trigger" // a trigger that never reached a skill
)

// Span-name templates: the low-cardinality forms of subjects that name spans
// and metrics, which must not take a value per activation or execution.

// JobTemplate names the subject of any job (Exec).
func (s Subjects) JobTemplate() string { return s.Prefix + ".exec.{pool}.{skill}.{activation}.{stage}" }

// RepairTemplate names the subject of any repair job (Repair).
func (s Subjects) RepairTemplate() string { return s.Prefix + ".repair.{skill}" }

// RepairParkedTemplate names the subject of any park request (RepairParked).
func (s Subjects) RepairParkedTemplate() string { return s.Prefix + ".repair.{skill}.parked" }

// DeadTemplate names the DLQ subject of any skill (Dead).
func (s Subjects) DeadTemplate() string { return s.Prefix + ".dead.{skill}" }

// EventTemplate names the subject of an event of type typ about an execution.
func (s Subjects) EventTemplate(typ string) string {
	return s.Prefix + ".events.{execution}." + Kind(typ)
}

// ActivationEventTemplate names the subject of an event of type typ about an
// activation (route.decided).
func (s Subjects) ActivationEventTemplate(typ string) string {
	return s.Prefix + ".events.{activation}." + Kind(typ)
}
