// Command skillbus is the skillbus command-line tool: dev (everything in one process), trigger, skills, bench. Run skillbus --help.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/skillbus/skillbus/internal/bench"
	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/secretenv"
)

func main() {
	// skillbus bench starts this binary again as the nats-server of each run.
	bench.ServeIfChild()
	// Secrets leave the environment block before anything starts, so a skill's
	// process cannot read them from /proc/<pid>/environ.
	secrets, err := secretenv.Take("SKILLBUS_NATS_PASSWORD", "SKILLBUS_NATS_URL", "SKILLBUS_LLM_API_KEY")
	if err != nil {
		cli.Report(os.Stderr, "skillbus", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = cli.Skillbus(ctx, os.Args[1:], secretenv.Getenv(secrets), os.Stdout, os.Stderr)
	stop()
	cli.Report(os.Stderr, "skillbus", err)
	os.Exit(cli.ExitCode(err))
}
