// Package chaos is skillbus's chaos run: it starts a real fleet as separate processes
// (nats-server, the registry, the router and several workers, built from this
// repository), publishes thousands of triggers of side-effecting skills
// (testdata/chaos) while killing and restarting every kind of process at random
// moments, and then checks, from the EVENTS stream and the skills' side-effect
// files, that every trigger has exactly one final outcome and that no side effect
// happened twice.
//
// `make chaos` runs it; `go run ./internal/chaos/cmd/chaos -h` lists the knobs.
package chaos

import (
	"errors"
	"log/slog"
	"time"
)

// Config configures a chaos run. Zero values select the documented defaults.
type Config struct {
	// Repo is the repository root: binaries are built from it and the skills read
	// from Repo/testdata/chaos. Default ".".
	Repo string
	// Dir holds the binaries, the server's store, the logs and the side-effect
	// files. Default: a new temporary directory, removed after a clean run.
	Dir string
	// Triggers is how many triggers are published; default 10,000.
	Triggers int
	// Rate is how many triggers are published per second; default 100. The
	// publishing spreads over the run so that faults land while publishers publish.
	Rate int
	// Workers is how many worker processes run; default 3. Concurrency is each one's
	// jobs at once; default 16.
	Workers, Concurrency int
	// AckWait is the workers' and the router's --ack-wait: how soon a dead process's
	// messages are redelivered. Default 5s.
	AckWait time.Duration
	// FaultEvery bounds the random pause between faults; default 1s to 4s.
	FaultMin, FaultMax time.Duration
	// BigEvery makes every BigEvery-th trigger one for chaos-big, whose result is
	// larger than the server's max_payload; default 500 (20 of 10,000).
	BigEvery int
	// Limited adds chaos-limited (max_concurrent: 2) to the mix, as every 20th trigger.
	Limited bool
	// SlowEvery makes every SlowEvery-th trigger one for chaos-slow, whose step
	// runs 1.5·AckWait in a pool of its own that two more workers serve one job at
	// a time: its jobs wait in a worker's buffer past their ack wait and are
	// delivered again to the other worker while the first still holds them.
	// Default 100; negative: none.
	SlowEvery int
	// Grace is how long after a step ended its worker may be SIGKILLed for a second
	// run of the step to be put down to the kill; default 2s.
	Grace time.Duration
	// Stall ends the wait for outcomes when none arrived for this long; default 3m.
	Stall time.Duration
	// Timeout ends the wait for outcomes this long after the run began, whatever
	// is still arriving; default 1h.
	Timeout time.Duration
	// Settle is how long to keep the fleet running after the last outcome, to catch
	// late duplicates; default 2·AckWait + 5s.
	Settle time.Duration
	// NoDiskFull leaves out the disk-full phase. With it (the default), the server's
	// store is a tmpfs of StoreSize bytes (default 1 GiB), and once a third of the
	// triggers are published a ballast file fills it; it is held full for DiskHold
	// (default 5s) after JetStream reports the fault, then freed, and nats-server is
	// restarted if it does not take writes again within DiskSelfWait (default 15s).
	// Mounting a tmpfs needs root on Linux: elsewhere the phase is skipped, and the
	// report says why.
	NoDiskFull             bool
	StoreSize              int64
	DiskHold, DiskSelfWait time.Duration
	// Seed of the random fault schedule and trigger mix; default the time.
	Seed uint64
	// Keep keeps Dir even after a clean run.
	Keep bool
	// Log receives progress; default slog.Default().
	Log *slog.Logger
}

func (c *Config) defaults() error {
	if c.Repo == "" {
		c.Repo = "."
	}
	if c.Triggers == 0 {
		c.Triggers = 10000
	}
	if c.Rate == 0 {
		c.Rate = 100
	}
	if c.Workers == 0 {
		c.Workers = 3
	}
	if c.Concurrency == 0 {
		c.Concurrency = 16
	}
	if c.AckWait == 0 {
		c.AckWait = 5 * time.Second
	}
	if c.FaultMin == 0 {
		c.FaultMin = time.Second
	}
	if c.FaultMax == 0 {
		c.FaultMax = 4 * time.Second
	}
	if c.SlowEvery == 0 {
		c.SlowEvery = 100
	}
	if c.BigEvery == 0 {
		c.BigEvery = 500
	}
	if c.Grace == 0 {
		c.Grace = 2 * time.Second
	}
	if c.Stall == 0 {
		c.Stall = 3 * time.Minute
	}
	if c.Timeout == 0 {
		c.Timeout = time.Hour
	}
	if c.Settle == 0 {
		c.Settle = 2*c.AckWait + 5*time.Second
	}
	if c.StoreSize == 0 {
		c.StoreSize = 1 << 30
	}
	if c.DiskHold == 0 {
		c.DiskHold = 5 * time.Second
	}
	if c.DiskSelfWait == 0 {
		c.DiskSelfWait = 15 * time.Second
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Triggers < 0 || c.Rate < 0 || c.Workers < 1 || c.Concurrency < 0 || c.AckWait < time.Second ||
		c.FaultMin < 0 || c.FaultMax < c.FaultMin || c.BigEvery < 0 || c.StoreSize < 64<<20 || c.DiskHold < 0 || c.DiskSelfWait < 0 {
		return errors.New("chaos: Triggers, Rate, Concurrency, BigEvery, DiskHold and DiskSelfWait must not be negative, Workers at least 1, AckWait at least 1s, FaultMax ≥ FaultMin, StoreSize at least 64 MiB")
	}
	return nil
}
