package cli

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/cobra"
)

// Skillbus is the main of cmd/skillbus, the command-line tool.
func Skillbus(ctx context.Context, args []string, getenv Env, stdout, stderr io.Writer) error {
	var c common
	root := &cobra.Command{
		Use:   "skillbus",
		Short: "Run declarative skills in response to events, over NATS JetStream",
		Long: `skillbus runs skills — SKILL.md and skill.yaml files — in response to trigger events
(CloudEvents published on NATS). A registry publishes the skill catalog, routers decide
which skills handle each trigger, and workers run them with durable retries, fallbacks
and a dead-letter queue.

Start everything on one machine with 'skillbus dev', then publish a trigger from
another terminal with 'skillbus trigger'.`,
		Example: `  skillbus dev --skills ./testdata/skills
  skillbus trigger --skill hello --data '{"name":"Ada"}' --wait
  skillbus trigger com.example.order.created --data @order.json --wait
  skillbus skills list`,
		// No command is a usage error: say what there is, and exit 2.
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Help()
			return &ExitError{Code: 2, Err: errors.New("no command given"), Quiet: true}
		},
	}
	c.register(root, getenv, "text")
	root.AddCommand(devCommand(&c, getenv, stderr), triggerCommand(&c, getenv, stdout), skillsCommand(&c, stdout), runsCommand(&c, stdout), dlqCommand(&c, stdout), repairCommand(&c, getenv, stdout, stderr), benchCommand(stdout), routeCommand(&c, stdout), versionCommand(stdout), tracesCommand(stdout, stderr),
		gatewayCommand(&c, getenv, stderr), consoleCommand(&c, getenv, stderr))
	return execute(ctx, root, args, stdout, stderr)
}
