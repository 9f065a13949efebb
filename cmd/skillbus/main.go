// Command skillbus is the skillbus command-line tool: dev (everything in one process), trigger, skills, bench. Run skillbus --help.
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
	err := cli.Skillbus(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	cli.Report(os.Stderr, "skillbus", err)
	os.Exit(cli.ExitCode(err))
}
