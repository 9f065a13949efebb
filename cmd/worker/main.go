// Command worker runs skillbus jobs. Run worker --help.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/skillbus/skillbus/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.Worker(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	cli.Report(os.Stderr, "worker", err)
	os.Exit(cli.ExitCode(err))
}
