package events

// Wildcards over whole families of subjects, for stream configurations, consumers
// and the NATS users' permissions: each matches every subject its family's builder
// (Event, Live, Exec, Repair, Dead) makes under the prefix.

// TriggersDebounced matches the runs of every debounced skill's bursts
// (TriggerDebounced), which only routers may publish.
func (s Subjects) TriggersDebounced() string { return s.Prefix + ".trigger.skill.*." + debouncedToken }

// TriggersInternal matches the triggers skillbus sends from its own sources
// (TriggerInternal), which only its routers, workers and operators may publish.
func (s Subjects) TriggersInternal() string { return s.Prefix + ".trigger.skill.*." + internalToken }

// AllEvents matches every event of every execution and activation (Event).
func (s Subjects) AllEvents() string { return s.Prefix + ".events.>" }

// AllLive matches every live event (Live).
func (s Subjects) AllLive() string { return s.Prefix + ".live.>" }

// AllExec matches every job (Exec).
func (s Subjects) AllExec() string { return s.Prefix + ".exec.>" }

// AllRepair matches every repair job, repair decision and park request (Repair,
// RepairDecided, RepairParked).
func (s Subjects) AllRepair() string { return s.Prefix + ".repair.>" }

// AllDead matches every dead letter (Dead).
func (s Subjects) AllDead() string { return s.Prefix + ".dead.>" }

// EventKind matches the events of type typ about any execution or activation.
func (s Subjects) EventKind(typ string) string { return s.Event("*", typ) }

// DeadReplayed is the token under Dead of the records of dead letters replayed
// (<prefix>.dead._replayed.<skill>).
const DeadReplayed = "_replayed"
