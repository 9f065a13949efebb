// Package schedule runs skills on their schedule and publishes delayed triggers.
//
// A Scheduler runs in every router process. One of them leads: it holds a lease,
// the key "leader" of the KV bucket schedules, renewed with compare-and-set every
// Lease/3. The others read the key as often; one whose copy of the key has not
// changed for a whole Lease (by its own clock, so clocks need not agree) takes it
// over with compare-and-set. A leader stopped cleanly deletes the key, so another
// takes over at its next read.
//
// The leader fires each scheduled skill's ticks. A tick is an ordinary trigger
// through the router: an explicit invocation of the skill (type io.skillbus.invoke
// on skillbus.trigger.skill.<name>), source /skillbus/scheduler, id
// schedule:<skill>:<tick as RFC3339>, data {"scheduled_at": "<tick>"}. The
// bucket's key tick.<skill> holds the last tick fired; the leader publishes a tick
// and then advances the key with compare-and-set. Exactly one run per tick
// follows from the id, not from the lease: two leaders at once (one paused past
// its lease) publish the same id, whose message id JetStream drops within its
// duplicate window, and the router routes an activation once; a leader that died
// between publishing and advancing the key leaves the tick to its successor,
// which publishes the same id again.
//
// Ticks missed while no scheduler ran (every router down, or the failover after a
// leader's crash) are found from the key: with catch_up: latest the latest of
// them runs once, with all each runs, up to skill.MaxCatchUp of the latest. A
// skill added to the catalog, or whose schedule changed, counts from the moment
// the leader sees it; one removed has its key deleted, so added again later it
// does not catch up on the time it was away.
//
// A delayed trigger (At, skillbus trigger --at/--in) is a key at.<activation id>
// of the bucket delayed (bus.BucketDelayed) holding the trigger; the leader
// publishes it when it is due, through the same path as any trigger, and deletes
// the key. It survives the publisher exiting and every router restarting; one due
// while no router ran is published when one starts. Senders write that bucket
// (not schedules, whose lease and ticks they cannot touch), so it is bounded and
// refuses roll-ups (see bus.DelayedStream), every scheduler keeps only when each
// key is due and reads the trigger when it is, and a trigger is checked as a
// sender's is when it is stored and again when it is published: one with a
// source or type of skillbus's own, written straight into the bucket, is dropped.
// Delayed triggers an earlier version stored in schedules are published from
// there the same way.
package schedule
