package control

import "context"

// CancelKnown is Cancel for an execution the caller knows was started (a
// router that indexed the run when it published its plan): it is cancelled
// without looking for it first, which for a run queued and never taken reads
// the JOBS stream back from its newest job until it finds the run's. KV repairs,
// which a router may not read, is not looked in: a run parked for a repair is
// cancelled when the repair ends and a worker takes its job again.
func (c *Controller) CancelKnown(ctx context.Context, executionID string, r Request) (Cancellation, error) {
	return c.cancelExecution(ctx, executionID, r, cancelHow{known: true, noRepairs: true})
}
