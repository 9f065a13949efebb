package events

import "strconv"

// Queue priority lanes.
//
// A job whose skill has a queue priority p (seconds, -600 to 600) other than 0
// is published on a lane of its pool: the pool token of its subject (see Exec)
// is LanePool(pool, Lane(p)), so every worker of a pool with queue priorities
// pulls each lane through a consumer of its own and takes the best job of what
// it has pulled. JetStream hands a consumer's messages out in stream order, so a
// job queued behind others in one consumer could not overtake them; in a lane
// of its own it is at the front. Jobs of priority 0 stay on the pool's own
// subject: a pool without queue priorities has no lanes.

// HeaderQueuePriority carries a job's queue priority, in whole seconds, on a job
// published on a lane: the worker orders the jobs it holds by their enqueue
// time less it.
const HeaderQueuePriority = "Skillbus-Queue-Priority"

// Lanes are the lanes besides a pool's own (lane 0), highest first.
var Lanes = [...]int{2, 1, -1, -2}

// laneBand is the priority, in seconds, above which a job takes the outer lane
// (2 or -2): a run a minute ahead or more is not queued behind those only a few
// seconds ahead.
const laneBand = 60

// Lane is the lane of a queue priority: 0 for 0, 1 for 1 to 60 seconds, 2 above,
// and the same below 0.
func Lane(priority int) int {
	switch {
	case priority > laneBand:
		return 2
	case priority > 0:
		return 1
	case priority < -laneBand:
		return -2
	case priority < 0:
		return -1
	}
	return 0
}

// LanePool is the pool token of a pool's lane: the pool itself for lane 0,
// otherwise pool~p<lane> ("default~p2", "default~p-1"). '~' is in no pool's
// name (a pool is letters, digits, '-' and '_'), so a lane never takes the name
// of another pool, nor ExecPool(pool)'s consumer its jobs.
func LanePool(pool string, lane int) string {
	if lane == 0 {
		return pool
	}
	return pool + "~p" + strconv.Itoa(lane)
}

// LanePool is the pool token a job of r is published on: the lane of its pool
// that its queue priority falls in. Every job of a run is, also those published
// again (a fallback, a resume, a release from a slot or a throttle, a repair, a
// replay), so that the run keeps its place in the queue throughout.
func (r SkillRef) LanePool() string { return LanePool(r.Pool, Lane(r.QueuePriority)) }
