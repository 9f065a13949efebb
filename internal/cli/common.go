// Package cli holds the commands of skillbus's binaries. Each binary's main only calls
// one of the functions here with its arguments, environment and output streams, so the
// whole command line is testable in process.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/pkg/bus"
)

// ExitError carries a process exit code. Code 1 is a failed execution or operation,
// 2 a usage error. Quiet errors were already reported to the user in the command's
// own output, so the main does not print them again.
type ExitError struct {
	Code  int
	Err   error
	Quiet bool
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode returns the exit code for an error returned by a command: 0 for nil, the
// code of an *ExitError, 2 for flag errors, else 1.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 1
}

// Report writes err for the user, unless it is quiet.
func Report(w io.Writer, prog string, err error) {
	var ee *ExitError
	if err == nil || errors.As(err, &ee) && ee.Quiet {
		return
	}
	fmt.Fprintln(w, prog+":", err)
}

// Env reads the environment; tests pass a map's lookup.
type Env func(string) string

// common holds the flags every command that talks to NATS has.
type common struct {
	natsURL   string
	prefix    string
	logLevel  string
	logFormat string
	creds     string
	replicas  int
	keep      retention // zero unless registerRetention: the bus's defaults
	tlsCA     string
	tlsCert   string
	tlsKey    string
	nkey      string
	user      string
	password  string
	envErr    error        // a malformed environment variable, reported when the command runs
	log       *slog.Logger // set by logger: where connection events are logged
}

// serviceLogs makes a long-running subcommand of the CLI (gateway, console) log
// JSON, as the registry, router and worker do, unless --log-format or
// $SKILLBUS_LOG_FORMAT says otherwise: the CLI's own default, text, is for people
// at a terminal.
func (c *common) serviceLogs(cmd *cobra.Command, getenv Env) {
	if !cmd.Flags().Changed("log-format") && getenv("SKILLBUS_LOG_FORMAT") == "" {
		c.logFormat = "json"
	}
}

func (c *common) register(cmd *cobra.Command, getenv Env, defaultFormat string) {
	f := cmd.PersistentFlags()
	f.StringVar(&c.natsURL, "nats-url", envOr(getenv, "SKILLBUS_NATS_URL", nats.DefaultURL), "NATS server URL(s), comma-separated ($SKILLBUS_NATS_URL)")
	f.StringVar(&c.prefix, "prefix", envOr(getenv, "SKILLBUS_PREFIX", "skillbus"), "subject prefix of every subject and stream ($SKILLBUS_PREFIX)")
	f.IntVar(&c.replicas, "replicas", c.envInt(getenv, "SKILLBUS_REPLICAS", 1), "replicas of the streams and buckets this process creates: 1, or 3 on a cluster ($SKILLBUS_REPLICAS)")
	f.StringVar(&c.creds, "creds", getenv("SKILLBUS_NATS_CREDS"), "NATS credentials file ($SKILLBUS_NATS_CREDS); or set $SKILLBUS_NATS_USER (default skillbus) and $SKILLBUS_NATS_PASSWORD")
	f.StringVar(&c.tlsCA, "tls-ca", getenv("SKILLBUS_NATS_CA"), "CA certificate that signed the NATS server's TLS certificate ($SKILLBUS_NATS_CA)")
	c.user, c.password = getenv("SKILLBUS_NATS_USER"), getenv("SKILLBUS_NATS_PASSWORD")
	f.StringVar(&c.logLevel, "log-level", envOr(getenv, "SKILLBUS_LOG_LEVEL", "info"), "log level: debug, info, warn, error ($SKILLBUS_LOG_LEVEL)")
	f.StringVar(&c.logFormat, "log-format", envOr(getenv, "SKILLBUS_LOG_FORMAT", defaultFormat), "log format: json or text ($SKILLBUS_LOG_FORMAT)")
	c.registerAuth(cmd, getenv)
	cmd.Version = version()
	cmd.SetVersionTemplate("{{.Name}} {{.Version}}\n")
}

func (c *common) logger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, usage("--log-level %q: want debug, info, warn or error", c.logLevel)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch c.logFormat {
	case "json":
		// Durations as people and the docs write them ("retry_in":"2s"), not as
		// integer nanoseconds, which is how encoding/json writes a time.Duration.
		jopts := *opts
		jopts.ReplaceAttr = func(_ []string, a slog.Attr) slog.Attr {
			if a.Value.Kind() == slog.KindDuration {
				a.Value = slog.StringValue(a.Value.Duration().String())
			}
			return a
		}
		c.log = slog.New(slog.NewJSONHandler(w, &jopts))
	case "text":
		c.log = slog.New(slog.NewTextHandler(w, opts))
	default:
		return nil, usage("--log-format %q: want json or text", c.logFormat)
	}
	return c.log, nil
}

// connect dials NATS and wraps it in a Bus.
func (c *common) connect(name string) (*bus.Bus, error) {
	if c.envErr != nil {
		return nil, c.envErr
	}
	opts, err := c.natsOptions()
	if err != nil {
		return nil, err
	}
	nc, err := bus.Connect(c.natsURL, name, opts...)
	if err != nil {
		return nil, c.connectError(err)
	}
	b, err := bus.New(nc, bus.Config{Prefix: c.prefix, Replicas: c.replicas,
		JobsMaxAge: c.keep.jobs.d, EventsMaxAge: c.keep.events.d, TriggerMaxAge: c.keep.triggers.d, DeadMaxAge: c.keep.dead.d})
	if err != nil {
		nc.Close()
		return nil, usage("%v", err)
	}
	return b, nil
}

func envOr(getenv Env, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

func (c *common) envInt(getenv Env, key string, def int) int {
	v := getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		c.envErr = usage("$%s=%q is not a number", key, v)
		return def
	}
	return n
}

func usage(format string, args ...any) error {
	return &ExitError{Code: 2, Err: fmt.Errorf(format, args...)}
}

// execute runs a cobra command tree with the given arguments and streams.
func execute(ctx context.Context, root *cobra.Command, args []string, stdout, stderr io.Writer) error {
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SilenceUsage = true
	root.SilenceErrors = true
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &ExitError{Code: 2, Err: fmt.Errorf("%w\nRun '%s --help' for usage.", err, cmd.CommandPath())}
	})
	// A wrong number of arguments is a usage error too, whichever command, and
	// so is an unknown subcommand of a group (skillbus runs bogus), which cobra
	// answers with the group's help and success; a near miss gets cobra's
	// suggestions, as at the top level.
	root.InitDefaultCompletionCmd(args...) // now, not in Execute, so that it is wrapped too
	var wrapArgs func(c *cobra.Command)
	wrapArgs = func(c *cobra.Command) {
		if c.Args != nil {
			c.Args = usageArgs(c.Args)
		}
		if c != root && c.HasSubCommands() && !c.Runnable() {
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(cmd *cobra.Command, args []string) error {
				if len(args) > 0 {
					// As cobra answers at the top level: skillbus dlq lst suggests list.
					hint := ""
					if cmd.SuggestionsMinimumDistance <= 0 {
						cmd.SuggestionsMinimumDistance = 2 // cobra's default
					}
					if s := cmd.SuggestionsFor(args[0]); len(s) > 0 && !cmd.DisableSuggestions {
						hint = "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n"
					}
					return usage("unknown command %q for %q%s\nRun '%s --help' for usage.", args[0], cmd.CommandPath(), hint, cmd.CommandPath())
				}
				return cmd.Help()
			}
		}
		for _, sub := range c.Commands() {
			wrapArgs(sub)
		}
	}
	wrapArgs(root)
	err := root.ExecuteContext(ctx)
	if err != nil && strings.HasPrefix(err.Error(), "unknown command") {
		return &ExitError{Code: 2, Err: err}
	}
	if err != nil && errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil // interrupted: not an error
	}
	return err
}
