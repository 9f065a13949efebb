// Command chaos runs skillbus's chaos run (package internal/chaos): a real fleet of
// processes, thousands of side-effecting triggers, every kind of process killed at
// random moments, and a check that nothing was lost, duplicated or done twice.
//
//	go run ./internal/chaos/cmd/chaos -triggers 10000
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/skillbus/skillbus/internal/chaos"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfg chaos.Config
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Repo, "repo", ".", "repository root: binaries are built from it, skills read from its testdata/chaos")
	fs.StringVar(&cfg.Dir, "dir", "", "directory for binaries, the server's store, logs and side-effect files (default: a temporary one, removed after a clean run)")
	fs.IntVar(&cfg.Triggers, "triggers", 10000, "triggers to publish")
	fs.IntVar(&cfg.Rate, "rate", 100, "triggers published per second")
	fs.IntVar(&cfg.Workers, "workers", 3, "worker processes")
	fs.IntVar(&cfg.Concurrency, "concurrency", 16, "jobs each worker runs at once")
	fs.DurationVar(&cfg.AckWait, "ack-wait", 0, "the workers' and router's --ack-wait (default 5s)")
	fs.DurationVar(&cfg.FaultMin, "fault-min", 0, "shortest pause between faults (default 1s)")
	fs.DurationVar(&cfg.FaultMax, "fault-max", 0, "longest pause between faults (default 4s)")
	fs.IntVar(&cfg.BigEvery, "big-every", 500, "every Nth trigger runs chaos-big, whose result exceeds max_payload (0: none)")
	fs.BoolVar(&cfg.Limited, "limited", true, "include chaos-limited (max_concurrent: 2) in the mix, as every 20th trigger")
	fs.IntVar(&cfg.SlowEvery, "slow-every", 100, "every Nth trigger runs chaos-slow, 1.5 ack waits long on two one-slot workers of its own pool (-1: none)")
	fs.DurationVar(&cfg.Grace, "grace", 0, "how long after a step ended a SIGKILL of its worker explains a second run (default 2s)")
	fs.DurationVar(&cfg.Stall, "stall", 0, "give up waiting when no outcome arrived for this long (default 3m)")
	fs.DurationVar(&cfg.Timeout, "timeout", 0, "stop waiting for outcomes this long after the start (default 1h)")
	fs.DurationVar(&cfg.Settle, "settle", 0, "keep the fleet running this long after the last outcome, for late duplicates (default 2·ack-wait+5s)")
	diskFull := fs.Bool("disk-full", true, "fill the server's store (a tmpfs the run mounts; needs root on Linux, else the phase is skipped and the report says so) once a third of the triggers are published, hold it full, free it, and restart nats-server if it does not take writes again by itself")
	fs.DurationVar(&cfg.DiskHold, "disk-hold", 0, "how long the store stays full once JetStream reports it (default 5s)")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "seed of the fault schedule and trigger mix (default: the time)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the directory even after a clean run")
	quiet := fs.Bool("q", false, "log only problems, not progress and faults")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg.NoDiskFull = !*diskFull
	lvl := slog.LevelInfo
	if *quiet {
		lvl = slog.LevelWarn
	}
	cfg.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	rep, err := chaos.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return 2
	}
	rep.Print(stdout)
	if rep.Dir != "" {
		if f, err := os.Create(filepath.Join(rep.Dir, "report.txt")); err == nil {
			rep.Print(f)
			f.Close()
		}
	}
	if !rep.OK() {
		fmt.Fprintln(stdout, "FAIL: work was lost, duplicated or done twice, or a flow-control bound broke (see above)")
		return 1
	}
	fmt.Fprintln(stdout, "ok")
	return 0
}
