package natstest

// BuildFlags are the flags a test gives `go build` for the programs it starts as
// processes: -race when the test itself is built with it. The packages are then
// compiled once, for the tests and the programs alike; a program built without
// -race beside a -race test compiles every dependency a second time, which costs
// make test minutes on a cold cache.
func BuildFlags() []string {
	if raceEnabled {
		return []string{"-race"}
	}
	return nil
}
