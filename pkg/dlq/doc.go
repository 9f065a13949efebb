// Package dlq reads skillbus's dead-letter queue and publishes its entries again.
//
// The DLQ is the stream SKILLBUS_DLQ (subjects <prefix>.dead.>, kept 30 days by
// default). Three kinds of entries land there:
//
//   - a job whose skill failed for good and had no fallback left, under
//     <prefix>.dead.<skill>: an io.skillbus.job event whose data is an
//     events.DeadLetter (the job as it was, the failure class, the reason, the failing
//     step, the delivery count). Its id is the dead execution's id.
//   - a trigger the router rejected (invalid, unknown skill, too large, ...), under
//     <prefix>.dead._trigger: the raw trigger message with the router's code and reason
//     in Skillbus-* headers. Its id is "trigger.<seq>", seq being the trigger's
//     sequence in the TRIGGERS stream.
//   - a job message no worker could read, under <prefix>.dead._job. Its id is
//     "job.<seq>". It can be shown but not replayed.
//
// A Queue lists and shows entries and replays them. A replay publishes a job entry's
// job again as a new execution, by default of the skill's current catalog version —
// after the skill was repaired, the repaired one — or of the version that died
// (ReplayOptions.Pin); a trigger entry is published again as a new trigger, which the
// router routes afresh. Every replay is recorded as an io.skillbus.dlq.replayed event,
// in the DLQ under <prefix>.dead._replayed.<new id> (kept as long as the entries) and
// on the new execution's events.
//
// Replays are idempotent: the new execution id is derived from the entry's id and the
// replay's number, so asking for the same replay twice — a retried command, two
// operators at once — publishes one job. The first replay of an entry is number 1;
// ReplayOptions.Again asks for the next number, to run an entry once more.
//
// The package talks to NATS only through the *bus.Bus it is given; the skillbus CLI
// and any other front end call the same functions.
package dlq
