// Command worker runs skillbus jobs. Run worker --help.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/secretenv"
)

func main() {
	// Secrets leave the environment block before anything starts, so a skill's
	// process cannot read them from /proc/<pid>/environ.
	secrets, err := secretenv.Take("SKILLBUS_NATS_PASSWORD", "SKILLBUS_NATS_URL", "SKILLBUS_LLM_API_KEY")
	if err != nil {
		cli.Report(os.Stderr, "worker", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = cli.Worker(ctx, os.Args[1:], secretenv.Getenv(secrets), os.Stdout, os.Stderr)
	stop()
	cli.Report(os.Stderr, "worker", err)
	os.Exit(cli.ExitCode(err))
}
