package cli

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"github.com/skillbus/skillbus/events"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/internal/storage"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/registry"
	"github.com/skillbus/skillbus/pkg/skill"
)

func devCommand(c *common, getenv Env, stderr io.Writer) *cobra.Command {
	var (
		host         string
		port         int
		store        string
		roots        []string
		workers      int
		syncInterval time.Duration
		maxStore     int64
		rf           routerFlags
		wf           workerFlags
		o            observe
		gatewayAddr  string
		gf           gatewayFlags
		uiAddr       string
		cf           consoleFlags
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the whole system in one process on an embedded NATS server",
		Long: `dev starts an embedded NATS server with JetStream (file storage under --store), then
the registry, a router and --workers workers, all in this process. The server listens on
127.0.0.1:4222 by default, so 'skillbus trigger', the nats CLI and separately started
workers can join it.

On any other --host the server requires a user and password: $SKILLBUS_NATS_USER
(default skillbus) and $SKILLBUS_NATS_PASSWORD if set, or else a password generated
for this run and printed, with the export lines other commands need. Set
$SKILLBUS_NATS_PASSWORD to require one on loopback too: there, without one, anything
on this machine can administer JetStream, skills with network permission included.

Skills come from --skills, or else from the discovery paths that exist: ./skills,
./.agents/skills, ./.claude/skills, ~/.agents/skills, ~/.claude/skills,
/etc/agent/skills (the first definition of a name wins).

Ctrl-C stops taking work, lets in-flight jobs finish, and shuts down; nothing
persisted is lost, and the next start carries on where this one stopped. The store is
locked while dev runs: a second dev beside it needs its own --port and --store.`,
		Example: `  skillbus dev --skills ./testdata/skills
  skillbus dev --port 14222 --store /tmp/skillbus --workers 4`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := events.ParseLevel(wf.events); err != nil {
				return usage("--events: %v", err)
			}
			rf.events = wf.events
			ctx := cmd.Context()
			log, err := c.logger(stderr)
			if err != nil {
				return err
			}
			if workers < 1 {
				return usage("--workers must be at least 1")
			}
			if uiAddr != "" {
				if err := cf.check(); err != nil {
					return err
				}
			}
			if len(roots) == 0 {
				home, _ := os.UserHomeDir()
				wd, _ := os.Getwd()
				for _, r := range skill.DefaultRoots(wd, home) {
					if st, err := os.Stat(r); err == nil && st.IsDir() {
						roots = append(roots, r)
					}
				}
				if len(roots) == 0 && inSkillbusRepo(wd) {
					// The README's commands run from a checkout: its example skills.
					roots = []string{filepath.Join("testdata", "skills")}
					fmt.Fprintln(stderr, "no ./skills here: using the example skills in ./testdata/skills (the skillbus repository's); --skills DIR picks others")
				}
				if len(roots) == 0 {
					return usage("no skills found: pass --skills DIR, or create ./skills (in the skillbus repository, ./testdata/skills holds the examples)")
				}
			}
			for _, r := range roots {
				if st, err := os.Stat(r); err != nil || !st.IsDir() {
					return usage("--skills %s: not a directory", r)
				}
			}
			if err := os.MkdirAll(store, 0o755); err != nil {
				return fmt.Errorf("--store: %w", err)
			}
			abs, _ := filepath.Abs(store)
			tel, log, stopTel, err := o.start(ctx, "skillbus-dev", log)
			if err != nil {
				return err
			}
			defer stopTel()
			auth, err := c.devAuth(host)
			if err != nil {
				return err
			}
			if maxStore < 0 {
				return usage("--max-store must not be negative")
			}
			srv, err := bus.StartEmbedded(bus.EmbedConfig{Host: host, Port: port, StoreDir: abs, SyncInterval: syncInterval, MaxStore: maxStore, User: c.user, Password: c.password})
			if err != nil {
				return err
			}
			defer srv.Shutdown()
			// A full disk leaves JetStream unable to write until it is started
			// again: the guard does that once space is free, and /readyz says so
			// meanwhile.
			guard, err := storage.NewGuard(storage.GuardConfig{Server: srv.Current, Restart: srv.Restart, Log: log})
			if err != nil {
				return err
			}
			guard.Start()
			defer guard.Stop()
			tel.Health.Add("jetstream store", guard.Check)
			c.natsURL = srv.URL()
			b, err := c.connect("skillbus-dev")
			if err != nil {
				return err
			}
			defer b.Close()
			if err := b.Ensure(ctx); err != nil {
				return err
			}
			watchBus(tel, b)
			o.watchStore(tel, b)
			// At a terminal (text logs), skill files' problems print as a compiler
			// prints them, not as escaped log messages.
			var problems io.Writer
			if c.logFormat == "text" {
				problems = stderr
			}
			reg, err := startRegistry(ctx, b, log, roots, problems)
			if err != nil {
				return err
			}
			defer reg.Stop()
			rep := reg.Last()
			tb, err := newToolbox(ctx, b, log, wf)
			if err != nil {
				return err
			}
			defer tb.close()
			stopRouter, err := startRouter(ctx, b, log, rf, tel)
			if err != nil {
				return err
			}
			stops := []func(context.Context){}
			for i := range workers {
				// Names are numbered, --name's too: each worker is a service of its own.
				f := wf
				base := wf.name
				if base == "" {
					h, _ := os.Hostname()
					base = h + "-dev"
				}
				f.name = fmt.Sprintf("%s-%d", base, i+1)
				stop, err := startWorker(ctx, b, log, f, tb, tel)
				if err != nil {
					shutdown(log, append([]func(context.Context){stopRouter}, stops...)...)
					return err
				}
				// Each worker is a skillbus-worker micro service, as a worker process is:
				// nats micro ls lists it, skillbus.worker.<name>.status answers.
				svc, err := serveWorker(ctx, b, f, tb)
				if err != nil {
					shutdown(log, append([]func(context.Context){stopRouter, stop}, stops...)...)
					return err
				}
				stops = append(stops, func(ctx context.Context) { _ = svc.Stop(); stop(ctx) })
			}
			if wf.repair {
				stop, err := startRepair(ctx, b, log, wf, tb, tel.Metrics)
				if err != nil {
					shutdown(log, append([]func(context.Context){stopRouter}, stops...)...)
					return err
				}
				stops = append(stops, stop)
			}
			watchConsumer(tel, b, "", b.StreamTriggers(), "router")
			for _, p := range wf.pools {
				watchConsumer(tel, b, p, b.StreamJobs(), "worker-"+p)
			}
			// The gateway and the console first, so that the banner says where
			// they listen before it says how to stop.
			var extra strings.Builder
			var gatewayDone <-chan error
			if gatewayAddr != "" {
				var addr net.Addr
				gf.maxEvent = rf.maxEventBytes // one limit: the gateway refuses what the router would
				addr, gatewayDone, err = gf.start(ctx, gatewayAddr, b, log)
				if err != nil {
					shutdown(log, append([]func(context.Context){stopRouter}, stops...)...)
					return err
				}
				extra.WriteString(gatewayBanner(addr.String()))
			}
			var uiDone <-chan error
			if uiAddr != "" {
				var addr net.Addr
				addr, uiDone, err = cf.start(ctx, uiAddr, b, log)
				if err != nil {
					shutdown(log, append([]func(context.Context){stopRouter}, stops...)...)
					return err
				}
				extra.WriteString(consoleBanner(addr.String(), cf.token == ""))
			}
			const stop = "Ctrl-C to stop.\n\n"
			fmt.Fprint(stderr, strings.TrimSuffix(banner(srv.URL(), abs, roots, rep, workers, auth), stop)+extra.String()+stop)
			<-ctx.Done()
			if gatewayDone != nil {
				<-gatewayDone
			}
			if uiDone != nil {
				<-uiDone
			}
			// Router first, so no new jobs appear while the workers drain.
			shutdown(log, append([]func(context.Context){stopRouter}, stops...)...)
			_ = b.Drain()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&host, "host", "127.0.0.1", "address the embedded NATS server listens on; beyond loopback it requires a password ($SKILLBUS_NATS_PASSWORD, or one generated and printed)")
	f.IntVar(&port, "port", 4222, "port of the embedded NATS server (-1: any free port)")
	f.StringVar(&store, "store", ".skillbus", "directory of the JetStream files")
	f.StringArrayVar(&roots, "skills", nil, "directory of skills (repeatable; the first definition of a name wins)")
	f.IntVar(&workers, "workers", 2, "workers to run in this process")
	f.DurationVar(&syncInterval, "sync-interval", 0, "how often JetStream fsyncs (0: the server default, 2m)")
	f.Int64Var(&maxStore, "max-store", 0, "bytes JetStream may store (0: 75% of the space free under --store at start); at the limit, publishes are refused until space is freed within it")
	f.StringVar(&gatewayAddr, "gateway", "", "also serve the HTTP ingress (POST /events, /hooks/<name>) on this address, e.g. 127.0.0.1:8080; see 'skillbus gateway --help'")
	f.StringVar(&uiAddr, "ui", "", "also serve the web console on this address, e.g. 127.0.0.1:8090; see 'skillbus console --help'")
	c.registerRetention(cmd, getenv)
	rf.register(cmd)
	wf.repair = true // one process: the repair service runs beside the workers
	wf.register(cmd, getenv)
	wf.registerRepair(cmd, "repair-")
	cf.register(cmd, getenv)
	o.register(cmd, getenv)
	gf.register(cmd, getenv)
	return cmd
}

// inSkillbusRepo reports whether dir is the root of a skillbus checkout, which has
// example skills in testdata/skills.
func inSkillbusRepo(dir string) bool {
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil || !strings.HasPrefix(string(mod), "module github.com/skillbus/skillbus\n") {
		return false
	}
	st, err := os.Stat(filepath.Join(dir, "testdata", "skills"))
	return err == nil && st.IsDir()
}

func gatewayBanner(addr string) string {
	return fmt.Sprintf(`HTTP gateway on http://%s — post a CloudEvent:
  curl -X POST 'http://%s/events?wait=30s' -H 'ce-specversion: 1.0' -H 'ce-id: 1' \
    -H 'ce-source: /curl' -H 'ce-type: com.example.greet' -H 'Content-Type: application/json' -d '{"name":"Ada"}'

`, addr, addr)
}

// devAuth decides the embedded server's credentials: those of $SKILLBUS_NATS_USER
// and $SKILLBUS_NATS_PASSWORD when the password is set; on a host other than
// loopback without them, user skillbus and a password made now. It returns what
// the banner says about them.
func (c *common) devAuth(host string) (string, error) {
	if c.password != "" {
		if c.user == "" {
			c.user = "skillbus"
		}
		return fmt.Sprintf("user %s, password from $SKILLBUS_NATS_PASSWORD", c.user), nil
	}
	c.user = "" // without a password, a user alone is no credential
	if host == "" || loopback(net.JoinHostPort(host, "0")) {
		return "", nil
	}
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making a NATS password: %w", err)
	}
	c.user, c.password = "skillbus", base64.RawURLEncoding.EncodeToString(b)
	return fmt.Sprintf("user %s, password generated for this run; in other terminals:\n              export SKILLBUS_NATS_USER=%s SKILLBUS_NATS_PASSWORD=%s",
		c.user, c.user, c.password), nil
}

// banner tells the user what is running, what is wrong with their skills, and what
// to try next.
func banner(url, store string, roots []string, rep *registry.Report, workers int, auth string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nskillbus dev is running\n  NATS      %s (JetStream store %s)\n", url, store)
	if auth != "" {
		fmt.Fprintf(&b, "            %s\n", auth)
	} else {
		b.WriteString("            no password: anything on this machine may administer it\n")
	}
	fmt.Fprintf(&b, "  skills    %d loaded from %s%s\n", len(rep.Loaded), strings.Join(roots, ", "), problems(rep.Diagnostics))
	if n := len(rep.Loaded); n > 0 {
		names := rep.Loaded[:min(n, 12)]
		more := ""
		if n > len(names) {
			more = fmt.Sprintf(", ... (%d more)", n-len(names))
		}
		fmt.Fprintf(&b, "            %s%s\n", strings.Join(names, ", "), more)
	}
	fmt.Fprintf(&b, "  router    1, workers %d\n", workers)
	if len(rep.Diagnostics) > 0 {
		b.WriteString("\nProblems in the skills (the others are loaded):\n")
		for _, d := range rep.Diagnostics {
			fmt.Fprintf(&b, "  %s\n", d)
		}
	}
	// The commands suggested reach this server: on another port, they say so.
	at := ""
	if url != nats.DefaultURL {
		at = " --nats-url " + url
	}
	b.WriteString("\nTry, from another terminal:\n")
	switch {
	case slices.Contains(rep.Loaded, "hello"):
		fmt.Fprintf(&b, "  skillbus%s trigger --skill hello --data '{\"name\":\"Ada\"}' --wait\n", at)
	case len(rep.Loaded) > 0:
		// Its inputs are for the user to read: guessed data would fail on a
		// required one.
		fmt.Fprintf(&b, "  skillbus%s skills show %s          (its inputs)\n", at, rep.Loaded[0])
		fmt.Fprintf(&b, "  skillbus%s trigger --skill %s --data '{...}' --wait\n", at, rep.Loaded[0])
	}
	fmt.Fprintf(&b, "  skillbus%s skills list\n\nCtrl-C to stop.\n\n", at)
	return b.String()
}

func problems(ds skill.Diagnostics) string {
	var errs, warns int
	for _, d := range ds {
		if d.Severity == skill.SeverityError {
			errs++
		} else {
			warns++
		}
	}
	if errs+warns == 0 {
		return ""
	}
	return fmt.Sprintf(" (%s, %s)", plural(errs, "error"), plural(warns, "warning"))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
