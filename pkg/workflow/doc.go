// Package workflow runs skill.yaml workflows. It is pure Go with no NATS
// inside: the worker gives it tools, a checkpoint store, a cache and an Observer, and
// turns what it reports into events and KV records. docs/engine.md has the same
// material with the reasons behind it.
//
// # Running a workflow
//
//	eng, err := workflow.New(workflow.Config{Tools: tools, Checkpoints: store, Cache: cache})
//	out, log, err := eng.ExecuteLog(ctx, workflow.Run{
//		ExecutionID: id, Skill: s, Inputs: inputs, Attempt: attempt,
//		Observer: obs, Confirmations: answers,
//	})
//
// Inputs are validated first (type, required, default, enum, pattern, max_length); a
// violation is a failure.Fatal error naming the input. Each step's result is then
// bound to its id (and its output name) for the templates, conditions and compute
// blocks of the steps after it, and the outputs are rendered at the end; without
// outputs, the run returns every step's result by name.
//
// # Order
//
// Steps form a graph. Step S waits for:
//
//   - the steps its depends_on names, if it has depends_on;
//   - otherwise, if it is in a parallel_group G, every earlier step not in G;
//   - otherwise, every earlier step;
//   - and in every case, every earlier step whose id or output name its condition,
//     args, compute block, loop or confirmation message reads. Reading a step is
//     waiting for it, even inside a parallel group.
//
// So a workflow without parallel_group and depends_on runs in the listed order, one
// step at a time; the steps of a group run together and the step after the group
// waits for all of them; a step with depends_on may run beside earlier steps it does
// not name. depends_on may only name earlier steps, not of the same group, so the
// graph has no cycles. A step starts when everything it waits for has finished,
// lowest index first, at most Config.MaxParallel (default 8) at a time per run. Loop
// items run one after another.
//
// What a step sees does not depend on timing: only the results of the steps it
// waits for, directly or through others, are in its Env, applied in list order, so
// when two steps write one output name the later-listed one wins.
//
// # Failures
//
// Failures carry a class (package failure): a tool's own class, Repairable for
// template and reference errors, Fatal for invalid inputs and exceeded expression
// limits (an endless compute loop stops within milliseconds). on_error decides what a
// failing step does:
//
//   - fail (default): the step fails and so does the run, with a *StepError;
//   - continue: the run goes on, and the step's names are bound to its error text,
//     marked as MCP-style tools mark failures ("❌ ..." — the text is kept as it is
//     when it has a ❌ already), so `'❌' in str(step)` detects it; the Observer
//     gets StepCompleted with the error;
//   - retry:N: a retryable failure is retried at once, up to N times, before the
//     step fails (longer retries belong to the broker: see package worker).
//
// A failed step stops only what waits for it. Steps that do not depend on it still
// run (the steps of its parallel group finish), and their results are checkpointed.
// The run's error is then the failure of the first failed step in list order,
// whatever failed first in time. So the set of steps that run, and the error, do not
// depend on timing; in a workflow that runs in the listed order this is simply "stop
// at the first failure".
//
// # Durable steps
//
// With a Checkpoints store (Config.Checkpoints or Run.Checkpoints) and an
// ExecutionID, every step that completes, is skipped or fails with on_error:
// continue is saved before anything that waits for it starts and before the
// Observer hears of it. A Run of the same ExecutionID — a redelivered job — loads
// them first: such steps are not run again, their results are bound again, and the
// Observer is told with StepResumed (a ResumeObserver) or StepSkipped(st,
// ReasonResumed). A step that failed the run is not saved, so the next attempt runs
// it again. Checkpoints written by another version of the skill are ignored.
//
// Tool calls carry the idempotency key "<executionid>/<step>", and
// "<executionid>/<step>/<i>" for loop item i: the same on every attempt.
//
// # Confirmations
//
// A step named in confirmations, when it is reached and its condition is true,
// needs an answer in Run.Confirmations[step id]. Without one, the step does not run:
// Execute finishes every step that does not wait for it, and returns a *PausedError
// with the rendered message, the default and the timeout. The worker asks (event
// confirmation.requested), acks, and runs the job again once answered: the run
// resumes from its checkpoints. Approved, the step runs; denied, it is skipped with
// the reason "denied by <who>", like a step whose condition is false, so what comes
// after runs and sees None. A skill with execution.approval: ask pauses the same way
// before anything runs, with the step SkillApproval ("*"); denied, the run fails with
// a Fatal error that is ErrDenied. Answers that time out are the worker's to record
// (as a denial by "timeout", say).
//
// # Cache
//
// A tool step with cache: TTL looks each call up in the Cache (Config.Cache or
// Run.Cache) under CacheKey(skill, step, tool, rendered args) before calling; a hit
// skips the call, and the Observer hears StepCached before StepCompleted. Results
// are stored for TTL. Compute steps are not cached: they are pure and cheap. A cache
// error is logged and treated as a miss.
//
// # Auto-heal
//
// The auto-heal pattern is ordinary steps — detect (compute), fix (tool),
// retry (tool), each with a condition — and the engine recognises it to report it.
// A tool step heals a failed step F when it runs (its condition is true) and its
// condition reads F — F failed with on_error: continue — directly or through the
// results of compute steps that read F; then AutoHealObserver.AutoHealTriggered
// comes before its StepStarted, with Action its tool and FailureType the first key
// its condition reads from such a compute result (failure_info.get('needs_vpn'))
// whose value is true, else F's failure class. A step that calls F's own tool is
// the retry, not a heal (StepLog.RetryOf).
//
// # Execution log
//
// ExecuteLog returns a Log (the execution's "memory") whatever the outcome: the run's
// status and error, and for every step its kind, tool, status, timing, the start of
// its result, its error and class, the attempt that ran it, whether it was resumed
// or cached, what it healed. It is JSON for KV runs; Format prints it for people.
//
// # Observer
//
// Steps may run concurrently, but Observer calls never overlap: the engine
// serialises them, so the worker's Observer needs no locking. For each step the
// calls come in the order (auto-heal) → started → completed or failed, or just
// skipped or resumed; steps that run together interleave.
//
// # Overhead
//
// MeasureOverhead reports what the engine adds per step (templates, condition,
// checkpoint in memory, scheduling), for `skillbus bench`.
package workflow
