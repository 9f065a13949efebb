package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/gateway"
	"github.com/skillbus/skillbus/pkg/tool"
)

// gatewayFlags are the HTTP ingress's knobs, shared by `gateway` and `dev --gateway`.
type gatewayFlags struct {
	tokens  []string
	secret  string
	hooks   string
	maxBody int64
	// maxEvent is the routers' --max-event-bytes: its own flag for the gateway
	// alone, the router's in dev.
	maxEvent int
	maxWait  time.Duration
	publish  time.Duration
	hosts    []string
	getenv   Env
}

func (gf *gatewayFlags) register(cmd *cobra.Command, getenv Env) {
	gf.getenv = getenv
	gf.secret = getenv("SKILLBUS_GATEWAY_SECRET")
	var tokens []string
	if v := getenv("SKILLBUS_GATEWAY_TOKENS"); v != "" {
		tokens = strings.Split(v, ",")
	}
	f := cmd.Flags()
	f.StringSliceVar(&gf.tokens, "token", tokens, "bearer token a sender must present, at least 16 characters (repeatable; better from $SKILLBUS_GATEWAY_TOKENS, comma-separated, which keeps it out of the process list). $SKILLBUS_GATEWAY_SECRET also admits bodies signed with it (X-Hub-Signature-256)")
	f.StringVar(&gf.hooks, "hooks", getenv("SKILLBUS_GATEWAY_HOOKS"), "YAML file of webhooks served at /hooks/<name> ($SKILLBUS_GATEWAY_HOOKS; its format: docs/operations.md, HTTP ingress)")
	f.Int64Var(&gf.maxBody, "max-body", 1<<20, "largest request body in bytes")
	f.DurationVar(&gf.maxWait, "max-wait", 5*time.Minute, "longest ?wait= a request may ask for")
	f.StringSliceVar(&gf.hosts, "allow-host", nil, "a Host name the gateway answers besides localhost, 127.0.0.1 and [::1] while it listens on loopback, such as a reverse proxy's (repeatable); requests for other names get 421, so that a web page elsewhere cannot post events through DNS rebinding")
	f.DurationVar(&gf.publish, "publish-timeout", 10*time.Second, "how long a request's events are sent again while JetStream cannot take them (a leader election, a server restart); then 503 with Retry-After")
}

// start listens on addr and serves the gateway on b until ctx ends. Without a token
// or a secret anyone who can reach it may start skills, so it must then listen on a
// loopback address only.
func (gf *gatewayFlags) start(ctx context.Context, addr string, b *bus.Bus, log *slog.Logger) (net.Addr, <-chan error, error) {
	cfg, err := gf.config(addr)
	if err != nil {
		return nil, nil, err
	}
	cfg.Bus, cfg.Log = b, log
	g, err := gateway.New(cfg)
	if err != nil {
		return nil, nil, usage("%v", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx, ln) }()
	return ln.Addr(), done, nil
}

// config reads the hooks file and checks that a gateway on addr is not open to
// anyone beyond loopback: what can be checked before connecting.
func (gf *gatewayFlags) config(addr string) (gateway.Config, error) {
	cfg := gateway.Config{Tokens: gf.tokens, Secret: gf.secret, MaxBodyBytes: gf.maxBody, MaxEventBytes: gf.maxEvent, MaxWait: gf.maxWait, PublishTimeout: gf.publish,
		LoopbackOnly: loopback(addr), AllowHosts: gf.hosts}
	if gf.hooks != "" {
		hooks, err := gateway.LoadHooks(gf.hooks, gf.getenv)
		if err != nil {
			return cfg, usage("--hooks: %v", err)
		}
		cfg.Hooks = hooks
		// In a process that also runs skills (dev), no skill may be given a
		// webhook's secret by environment.allow.
		for _, h := range hooks {
			if h.SecretEnv != "" {
				tool.ReserveEnv(h.SecretEnv)
			}
		}
	}
	if cfg.Open() && !loopback(addr) {
		return cfg, usage("the gateway at %s would let anyone who reaches it start skills: set $SKILLBUS_GATEWAY_TOKENS (or --token), or listen on 127.0.0.1", addr)
	}
	return cfg, nil
}

// loopback reports whether addr (host:port) listens on a loopback address only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func gatewayCommand(c *common, getenv Env, stderr io.Writer) *cobra.Command {
	var gf gatewayFlags
	var o observe
	var listen string
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Take CloudEvents and webhooks over HTTP and publish them as triggers",
		Long: `gateway is skillbus's HTTP ingress. POST /events takes CloudEvents in binary mode
(ce-* headers, the body as data), structured mode (Content-Type
application/cloudevents+json) or batch mode (application/cloudevents-batch+json),
as any CloudEvents SDK sends them; POST /hooks/<name> takes plain JSON webhooks
(GitHub's, for one) and maps them to CloudEvents as --hooks configures.

Each event is published as a trigger with its id as the dedupe id, and the answer is
202 with the activation id; with ?wait=30s it is the result (200, status completed,
failed or unmatched, and the outputs), or 202 with status pending if the wait ends
first (with what the run waits for, when it said so: a confirmation, for one).
?skill=NAME invokes a skill explicitly. No other query parameter is taken.

Senders authenticate with a bearer token ($SKILLBUS_GATEWAY_TOKENS), or sign the body
with HMAC-SHA256 (X-Hub-Signature-256: sha256=<hex>) under $SKILLBUS_GATEWAY_SECRET
(structured or batch mode only, so the event's id is signed) or the hook's secret.
Without any, the gateway only listens on a loopback address. A webhook body taken
before, within the hook's replay_window (default a week), is taken as its first
delivery whatever its headers say (docs/operations.md, "Webhook replay window").
Its NATS user needs only the gateway role (a publisher that may also write the
hooks bucket); started before the registry, it waits for the streams and that bucket.
It logs JSON, as the services do, unless --log-format text (or $SKILLBUS_LOG_FORMAT)
says otherwise.`,
		Example: `  SKILLBUS_GATEWAY_TOKENS=$(cat token) skillbus gateway --listen :8080 --hooks hooks.yaml
  curl -X POST localhost:8080/events?wait=30s -H "Authorization: Bearer $TOKEN" \
    -H 'ce-specversion: 1.0' -H 'ce-id: 1' -H 'ce-source: /curl' -H 'ce-type: com.example.greet' \
    -H 'Content-Type: application/json' -d '{"name":"Ada"}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c.serviceLogs(cmd, getenv)
			log, err := c.logger(stderr)
			if err != nil {
				return err
			}
			if _, err := gf.config(listen); err != nil {
				return err
			}
			tel, log, stopTel, err := o.start(cmd.Context(), "skillbus-gateway", log)
			if err != nil {
				return err
			}
			defer stopTel()
			b, err := c.connectWait(cmd.Context(), "skillbus-gateway", log)
			if err != nil {
				return err
			}
			defer b.Drain()
			// Started with the registry, it waits for the streams and the bucket
			// of webhook deliveries, which the registry creates.
			if err := ensure(cmd.Context(), b, false, log, needs{buckets: []string{b.BucketHooks()}}); err != nil {
				return err
			}
			tel.Health.Add("nats", b.CheckConnected())
			o.watchStore(tel, b)
			addr, done, err := gf.start(cmd.Context(), listen, b, log)
			if err != nil {
				return err
			}
			log.Info("gateway: listening", "addr", addr.String(), "nats", c.natsURL, "authenticated", len(gf.tokens) > 0 || gf.secret != "")
			return <-done
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8080", "address to listen on")
	gf.register(cmd, getenv)
	cmd.Flags().IntVar(&gf.maxEvent, "max-event-bytes", 256<<10, "largest event accepted (headers and data, as a router weighs a trigger): give it the routers' --max-event-bytes; larger is refused with 413")
	o.register(cmd, getenv)
	return cmd
}
