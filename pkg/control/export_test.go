package control

// SetRampCheckedHook calls f, until the returned func is called, each time Ramp
// has checked that its version exists and is about to write the ramp.
func SetRampCheckedHook(f func()) (unset func()) {
	rampCheckedHook.Store(&f)
	return func() { rampCheckedHook.Store(nil) }
}
