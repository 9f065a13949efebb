// Command router routes skillbus trigger events to skills. Run router --help.
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
	err := cli.Router(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	cli.Report(os.Stderr, "router", err)
	os.Exit(cli.ExitCode(err))
}
