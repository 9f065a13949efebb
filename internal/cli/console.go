package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/console"
)

// consoleFlags are the web console's knobs, shared by `console` and `dev --ui`.
type consoleFlags struct {
	token    string
	traceURL string
	window   time.Duration
	maxRuns  int
	hosts    []string
}

func (cf *consoleFlags) register(cmd *cobra.Command, getenv Env) {
	f := cmd.Flags()
	f.StringVar(&cf.token, "ui-token", getenv("SKILLBUS_UI_TOKEN"), "token people sign in to the console with to act (answer confirmations); without it the console is read-only. Better from $SKILLBUS_UI_TOKEN, which keeps it out of the process list")
	f.StringVar(&cf.traceURL, "trace-url", getenv("SKILLBUS_TRACE_URL"), "link from a run to its trace; {trace_id} is replaced, e.g. http://localhost:16686/trace/{trace_id} ($SKILLBUS_TRACE_URL)")
	f.DurationVar(&cf.window, "ui-history", 24*time.Hour, "how far back the console's runs list reads the events stream when it starts")
	f.IntVar(&cf.maxRuns, "ui-max-runs", 100_000, "most runs the console's list keeps in memory, oldest forgotten first")
	f.StringSliceVar(&cf.hosts, "ui-allow-host", nil, "a Host name the console answers besides localhost, 127.0.0.1 and [::1] while it listens on loopback, such as a reverse proxy's (repeatable); requests for other names get 421, so that a web page elsewhere cannot read it through DNS rebinding")
}

// check checks the flags before anything starts.
func (cf *consoleFlags) check() error {
	if cf.maxRuns < 1 {
		return usage("--ui-max-runs must be at least 1")
	}
	if err := console.CheckToken(cf.token); err != nil {
		return usage("%v", err)
	}
	return nil
}

// start listens on addr and serves the console on b until ctx ends.
func (cf *consoleFlags) start(ctx context.Context, addr string, b *bus.Bus, log *slog.Logger) (net.Addr, <-chan error, error) {
	if err := cf.check(); err != nil {
		return nil, nil, err
	}
	c, err := console.New(console.Config{Bus: b, Log: log, Token: cf.token, TraceURL: cf.traceURL, Window: cf.window, MaxRuns: cf.maxRuns,
		LoopbackOnly: loopback(addr), AllowHosts: cf.hosts})
	if err != nil {
		return nil, nil, usage("%v", err)
	}
	if !loopback(addr) {
		log.Warn("console: listening beyond this machine; anyone who reaches it can read every run's data (put it behind your own authentication)", "addr", addr)
	}
	if err := c.Start(ctx); err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		c.Stop()
		return nil, nil, fmt.Errorf("console: %w", err)
	}
	srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx) // the live streams end when the console stops
		c.Stop()
		_ = srv.Close()
	}()
	return ln.Addr(), done, nil
}

func consoleBanner(addr string, readOnly bool) string {
	mode := "sign in with --ui-token to answer confirmations"
	if readOnly {
		mode = "read-only: pass --ui-token (or $SKILLBUS_UI_TOKEN) to answer confirmations"
	}
	return fmt.Sprintf("web console on http://%s (%s)\n\n", addr, mode)
}

func consoleCommand(c *common, getenv Env, stderr io.Writer) *cobra.Command {
	var (
		listen string
		cf     consoleFlags
	)
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve the web console: runs live, why the router chose, confirmations",
		Long: `console serves a web console for a running skillbus over HTTP:

  /          runs, newest first, updating live; filter by skill, state and time
  /runs/ID   one run: its trigger, the plan with every candidate's scores and
             reasons, each step's output and error, the result, a trace link
  /skills    the catalog with versions, validation problems and success rates,
             and a form that asks the router which skills a request would run
  /waiting   runs waiting for a person's confirmation, to approve or deny

It is read-only unless started with --ui-token (at least 16 characters): people sign
in with the token and their name, which is recorded with every answer they give.
Wrong tokens are throttled: 5 from one address, then one every 12 s; 20 from all
addresses together, then one every 3 s. See docs/console.md.`,
		Example: `  skillbus console --listen 127.0.0.1:8090
  SKILLBUS_UI_TOKEN=$(openssl rand -hex 16) skillbus console --listen 127.0.0.1:8090 \
      --trace-url 'http://localhost:16686/trace/{trace_id}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c.serviceLogs(cmd, getenv)
			ctx := cmd.Context()
			if err := cf.check(); err != nil {
				return err
			}
			log, err := c.logger(stderr)
			if err != nil {
				return err
			}
			// Started before NATS (a fleet coming up at once), it waits for it, as
			// every other service does.
			b, err := c.connectWait(ctx, "skillbus-console", log)
			if err != nil {
				return err
			}
			defer b.Close()
			// And for the streams and buckets it reads, which the registry creates.
			if err := ensure(ctx, b, false, log, needs{buckets: []string{b.BucketRuns(), b.BucketSkills(), b.BucketRepairs()}}); err != nil {
				return err
			}
			addr, done, err := cf.start(ctx, listen, b, log)
			if err != nil {
				return err
			}
			fmt.Fprint(stderr, consoleBanner(addr.String(), cf.token == ""))
			return <-done
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8090", "address to serve the console on")
	cf.register(cmd, getenv)
	return cmd
}
