package natstest

import (
	"os"
	"strings"
)

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

// RaceEnv is the GORACE entry for the environment of a program a test starts
// (KEY=VALUE): the race detector's options the test was given, after
// atexit_sleep_ms=0. By default a program built with -race sleeps a second as it
// exits, for goroutines still running to report a race; a test that starts and
// stops dozens of programs waits that second on each of them. Races found while a
// program runs are reported as before, and its exit status is still 66.
func RaceEnv() string {
	return "GORACE=" + strings.TrimSpace("atexit_sleep_ms=0 "+os.Getenv("GORACE"))
}
