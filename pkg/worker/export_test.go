package worker

// SetHeldWrittenHook calls f, until the returned func is called, each time a run
// waiting for a concurrency slot has written its record and is about to try the
// slots again.
func SetHeldWrittenHook(f func(executionID string, rev uint64)) (unset func()) {
	heldWrittenHook.Store(&f)
	return func() { heldWrittenHook.Store(nil) }
}

// SetReleaseFault makes a waiting run's release fail when f returns an error,
// until the returned func is called.
func SetReleaseFault(f func(executionID string) error) (unset func()) {
	releaseFaultHook.Store(&f)
	return func() { releaseFaultHook.Store(nil) }
}

// SlotHolder is the execution the worker's view shows holding slot n of gate.
func (w *Worker) SlotHolder(gate string, n int) string {
	w.gates.mu.Lock()
	defer w.gates.mu.Unlock()
	return w.gates.slots[gate][n]
}

// SetCancelOnListHook calls f, until the returned func is called, each time a
// worker lists an ended execution's cancel_on keys.
func SetCancelOnListHook(f func(skill, executionID string)) (unset func()) {
	cancelOnListHook.Store(&f)
	return func() { cancelOnListHook.Store(nil) }
}

// SetSlotLostHook calls f, until the returned func is called, each time a run's
// heartbeat finds a concurrency slot it held taken or freed.
func SetSlotLostHook(f func(executionID string)) (unset func()) {
	slotLostHook.Store(&f)
	return func() { slotLostHook.Store(nil) }
}

// SetFinishedHook calls f, until the returned func is called, each time a run has
// returned its decision, before it is settled.
func SetFinishedHook(f func(executionID string)) (unset func()) {
	finishedHook.Store(&f)
	return func() { finishedHook.Store(nil) }
}

// GateView is the worker's view of gate: the executions holding its slots and
// those waiting for one, oldest first.
func (w *Worker) GateView(gate string) (holders, waiting []string) {
	w.gates.mu.Lock()
	defer w.gates.mu.Unlock()
	for _, id := range w.gates.slots[gate] {
		holders = append(holders, id)
	}
	for _, x := range w.gates.waiting[gate] {
		waiting = append(waiting, x.id)
	}
	return holders, waiting
}

// SetCancelWatchBehind makes the worker's copy of the cancel records miss those
// f returns true for, as a watch a moment behind would, until the returned func
// is called.
func SetCancelWatchBehind(f func(executionID string) bool) (unset func()) {
	cancelWatchHook.Store(&f)
	return func() { cancelWatchHook.Store(nil) }
}
