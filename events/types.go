package events

// Type names. Every type skillbus writes starts with Prefix.
const (
	Prefix = "io.skillbus."

	TypeRouteDecided          = Prefix + "route.decided"
	TypeRouteUnmatched        = Prefix + "route.unmatched"
	TypeJob                   = Prefix + "job"
	TypeExecutionStarted      = Prefix + "execution.started"
	TypeStepStarted           = Prefix + "step.started"
	TypeStepCompleted         = Prefix + "step.completed"
	TypeStepSkipped           = Prefix + "step.skipped"
	TypeStepFailed            = Prefix + "step.failed"
	TypeExecutionRetrying     = Prefix + "execution.retrying"
	TypeExecutionFallback     = Prefix + "execution.fallback"
	TypeExecutionCompleted    = Prefix + "execution.completed"
	TypeExecutionFailed       = Prefix + "execution.failed"
	TypeExecutionCancelled    = Prefix + "execution.cancelled"
	TypeExecutionDeadlettered = Prefix + "execution.deadlettered"
	TypeAutohealTriggered     = Prefix + "autoheal.triggered"
	TypeConfirmationRequested = Prefix + "confirmation.requested"
	TypeConfirmationRecorded  = Prefix + "confirmation.recorded"
	TypeDLQReplayed           = Prefix + "dlq.replayed"
	TypeWaitEnded             = Prefix + "wait.ended"
	TypeThrottleDue           = Prefix + "throttle.due"
	TypeExecutionWaiting      = Prefix + "execution.waiting"

	// Repair of skills broken by a repairable fault.
	TypeRepairRequested     = Prefix + "repair.requested"
	TypeRepairAttempted     = Prefix + "repair.attempted"
	TypeRepairProposed      = Prefix + "repair.proposed"
	TypeRepairDecided       = Prefix + "repair.decided"
	TypeRepairSucceeded     = Prefix + "repair.succeeded"
	TypeRepairFailed        = Prefix + "repair.failed"
	TypeRepairNoImprovement = Prefix + "repair.no_improvement"
	TypeRepairSkipped       = Prefix + "repair.skipped"
)

// Kind is the part of a type after Prefix ("execution.completed"); it is the last part
// of an event's subject.
func Kind(typ string) string {
	if len(typ) > len(Prefix) && typ[:len(Prefix)] == Prefix {
		return typ[len(Prefix):]
	}
	return typ
}

// Extension attribute names.
const (
	ExtCorrelationID = "correlationid"
	ExtCausationID   = "causationid"
	ExtExecutionID   = "executionid"
	ExtTraceParent   = "traceparent"
	ExtTraceState    = "tracestate"
	// ExtSkill on a trigger asks for explicit invocation of the named skill.
	ExtSkill = "skill"
	// ExtProgress set to ProgressLive on a trigger asks for its progress events on
	// the live subjects (see Level): a follower is listening. Without it, progress
	// that the events level does not persist is not published at all.
	ExtProgress  = "progress"
	ProgressLive = "live"
	// ExtParent on a trigger the skill tool publishes names the activation of the
	// job that invoked it. The router reads that activation's job and gives the
	// child one level of delegation more; a trigger's own claim of a depth is never
	// read, so a sender cannot lift the delegation bound.
	ExtParent = "skillparent"
	// ExtSeq on an execution's event followed live is its place in the execution's
	// own sequence (see Seq): its live and persisted events reach a follower by two
	// paths, each in order but not with each other, and the follower orders them by it.
	ExtSeq = "skillseq"
)

// HeaderCE is the prefix of the header that carries a CloudEvents attribute or
// extension of a binary-mode event on NATS (ce-id, ce-traceparent).
const HeaderCE = "ce-"

// Headers of the CloudEvents binding skillbus reads by name.
const (
	HeaderCEID              = HeaderCE + "id"
	HeaderCESpecVersion     = HeaderCE + "specversion"
	HeaderCESource          = HeaderCE + "source"
	HeaderCEType            = HeaderCE + "type"
	HeaderCESubject         = HeaderCE + "subject"
	HeaderCETime            = HeaderCE + "time"
	HeaderCEDataContentType = HeaderCE + "datacontenttype"
	HeaderCEDataSchema      = HeaderCE + "dataschema"
	HeaderCETraceParent     = HeaderCE + ExtTraceParent
	HeaderCETraceState      = HeaderCE + ExtTraceState
)

// HeaderTraceParent and HeaderTraceState are the W3C trace-context headers of a
// plain NATS request (a bus tool call) or HTTP request: the same names as the
// CloudEvents distributed-tracing extensions.
const (
	HeaderTraceParent = ExtTraceParent
	HeaderTraceState  = ExtTraceState
)

// NATS header names skillbus sets besides the CloudEvents binding's ce-* headers.
const (
	// HeaderLink, on a message published again for a new run of earlier work (a
	// job released after its skill's repair, a dead letter replayed), names the
	// span the new run follows from: "<reason> <traceparent>". That span is in a
	// trace of its own, which may have ended hours or days before.
	HeaderLink = "Skillbus-Link"
	// HeaderMsgID is JetStream's deduplication id.
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderRecovered marks a job published again while recovering from a crash
	// (the previous copy may have run): workers take the claim path for it.
	HeaderRecovered = "Skillbus-Recovered"
	// HeaderCheckCancel marks a job whose execution may have been cancelled
	// before the job was published: a run a router cancelled first (a cancel_on
	// event kept before it, a runs cancel --skill of a pending burst), or any run
	// of a skill with cancel_on, whose key an event may find between the key's
	// write and the job's publish. Workers take the claim path for it, which
	// reads the cancel from KV runs rather than their copy of the cancels, which
	// may be a moment behind.
	HeaderCheckCancel = "Skillbus-Check-Cancel"
	// HeaderRoute carried, on the jobs of a plan written by earlier routers, the
	// rest of the routing decision (a JobRoute as JSON). Routers now write it in the
	// job's data (Job.Route); readers still look here for jobs written before.
	HeaderRoute = "Skillbus-Route"
)

// Headers of a debounced skill's burst, on its latest trigger and its timer
// (Subjects.DebounceLatest, DebounceTimer): routers read them back to fold the
// next trigger and to start the run.
const (
	// HeaderDebounceSkill names the debounced skill.
	HeaderDebounceSkill = "Skillbus-Debounce-Skill"
	// HeaderDebounceFirst is when the burst's first trigger was folded (RFC 3339),
	// from which its timeout counts.
	HeaderDebounceFirst = "Skillbus-Debounce-First"
	// HeaderDebounceAct is the activation id of the trigger whose data the run takes.
	HeaderDebounceAct = "Skillbus-Debounce-Act"
	// HeaderDebounceSeq is that trigger's sequence in the triggers stream.
	HeaderDebounceSeq = "Skillbus-Debounce-Seq"
)

// Headers of a batched skill's log (Subjects.BatchItems) and timer
// (Subjects.BatchTimer): routers read them back to add the next trigger, to close
// a batch and to start its run.
const (
	// HeaderBatchSkill names the batched skill.
	HeaderBatchSkill = "Skillbus-Batch-Skill"
	// HeaderBatchN is a trigger's place in its batch, from 1; a marker that
	// closes a batch at its timeout has none.
	HeaderBatchN = "Skillbus-Batch-N"
	// HeaderBatchFirst is the stream sequence of the batch's first trigger, on
	// every later one and on the timer.
	HeaderBatchFirst = "Skillbus-Batch-First"
	// HeaderBatchBytes is the size of the batch's events so far, this one's
	// included.
	HeaderBatchBytes = "Skillbus-Batch-Bytes"
	// HeaderBatchFull marks the trigger that fills its batch: the next begins
	// a new one.
	HeaderBatchFull = "Skillbus-Batch-Full"
	// HeaderBatchCloses, on a batch's first trigger, is the first sequence of
	// the batch before it, which this trigger closed: it would not have fitted
	// in it (the size limit).
	HeaderBatchCloses = "Skillbus-Batch-Closes"
	// HeaderBatchSeq is the trigger's sequence in the triggers stream: a
	// batch's events are in that order.
	HeaderBatchSeq = "Skillbus-Batch-Seq"
)

// Headers of a call to a tool served on the bus (package bustool): a NATS
// request to Subjects.Tool(name) whose payload is the arguments; these carry the
// rest of the call, and a tool service in any language reads them.
const (
	// HeaderToolTimeout is how many milliseconds the caller will wait for the
	// reply; the server gives the tool a context with that deadline.
	HeaderToolTimeout = "Skillbus-Timeout-Ms"
	// HeaderToolExecutionID and HeaderToolStep name the execution and step making
	// the call.
	HeaderToolExecutionID = "Skillbus-Execution-Id"
	HeaderToolStep        = "Skillbus-Step"
	// HeaderIdempotencyKey is a side-effecting call's key, "<executionid>/<step>",
	// on a bus tool call and on an HTTP tool's request alike: a tool with side
	// effects does them once per key.
	HeaderIdempotencyKey = "Idempotency-Key"
)

// Headers of a dead letter: why it is dead and where it came from.
const (
	// HeaderDeadCode is the code of a trigger's rejection (an Unmatched* code).
	HeaderDeadCode = "Skillbus-Code"
	// HeaderDeadReason says why, in words.
	HeaderDeadReason = "Skillbus-Reason"
	// HeaderDeadSubject is the subject the message was read from.
	HeaderDeadSubject = "Skillbus-Subject"
	// HeaderDeadTriggerSeq is a rejected trigger's sequence in the TRIGGERS stream,
	// where a trigger too large to copy stays.
	HeaderDeadTriggerSeq = "Skillbus-Trigger-Seq"
)
