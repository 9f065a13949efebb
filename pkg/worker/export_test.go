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
