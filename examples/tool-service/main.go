// Command tool-service is a small skillbus tool service: it serves the tools
// slugify and word_stats on the bus, where every worker finds them.
//
//	go run ./examples/tool-service --nats-url nats://127.0.0.1:4222
//	nats micro info example-tools
//	nats req skillbus.tool.slugify '{"text":"Crème Brûlée, for 2!"}'
//
// A skill then uses them like any tool:
//
//	steps:
//	  - id: slug
//	    tool: slugify
//	    args: {text: "{{ inputs.title }}"}
//
// Run as many copies as you like: they share the calls.
//
// With OTEL_EXPORTER_OTLP_ENDPOINT set, each call is a span continuing the
// caller's trace (the worker's step), and --metrics-addr serves /metrics, /livez
// and /readyz.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/telemetry"
	"github.com/skillbus/skillbus/pkg/tool/bustool"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "tool-service:", err)
		os.Exit(1)
	}
}

// run serves the tools until ctx is done, then lets running calls finish for
// up to the grace period.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tool-service", flag.ContinueOnError)
	fs.SetOutput(stderr)
	defURL := getenv("NATS_URL")
	if defURL == "" {
		defURL = nats.DefaultURL
	}
	url := fs.String("nats-url", defURL, "NATS server URL (default $NATS_URL, else "+nats.DefaultURL+")")
	prefix := fs.String("prefix", bustool.DefaultPrefix, "subject prefix: tools are served on <prefix>.tool.<name>")
	name := fs.String("name", "example-tools", "micro service name")
	grace := fs.Duration("grace", 10*time.Second, "how long running calls may finish after a stop signal")
	metricsAddr := fs.String("metrics-addr", getenv("SKILLBUS_METRICS_ADDR"), "address serving /metrics, /livez and /readyz (empty: none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	// Tracing from the OTEL_* variables; off without an endpoint.
	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: *name, Getenv: getenv})
	if err != nil {
		return err
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tel.Shutdown(fctx)
	}()

	nc, err := nats.Connect(*url, nats.Name(*name), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", *url, err)
	}
	defer nc.Close()
	tel.Health.Add("nats", bus.NATSConnected(nc))
	if *metricsAddr != "" {
		addr, err := tel.Serve(*metricsAddr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "metrics on http://%s/metrics\n", addr)
	}

	srv, err := bustool.Serve(nc, bustool.ServerConfig{
		Name:        *name,
		Version:     "1.0.0",
		Description: "Example skillbus tools: slugify and word_stats",
		Prefix:      *prefix,
	}, tools()...)
	if err != nil {
		return err
	}
	info := srv.Info()
	var names []string
	for _, ep := range info.Endpoints {
		names = append(names, ep.Subject)
	}
	fmt.Fprintf(stdout, "serving %s as %s (%s)\n", strings.Join(names, ", "), info.Name, info.ID)

	<-ctx.Done()
	shut, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil {
		return fmt.Errorf("stopping: %w", err)
	}
	fmt.Fprintln(stdout, "stopped")
	return nil
}

func tools() []bustool.Def {
	return []bustool.Def{
		{
			Tool:        slugifyTool,
			Description: "Turns text into a URL slug: lowercase ASCII letters and digits joined by a separator, accents removed.",
			Schema: json.RawMessage(`{
				"type": "object",
				"properties": {
					"text":       {"type": "string", "description": "the text to slugify"},
					"separator":  {"type": "string", "description": "joins the words; default \"-\"", "maxLength": 3},
					"max_length": {"type": "integer", "description": "cut the slug at a word boundary to at most this many characters", "minimum": 1}
				},
				"required": ["text"],
				"additionalProperties": false
			}`),
		},
		{
			Tool:        wordStatsTool,
			Description: "Counts the words, characters, lines and sentences of a text and lists its most frequent words.",
			Schema: json.RawMessage(`{
				"type": "object",
				"properties": {
					"text": {"type": "string", "description": "the text to measure"},
					"top":  {"type": "integer", "description": "how many of the most frequent words to list; default 5", "minimum": 0, "maximum": 100}
				},
				"required": ["text"],
				"additionalProperties": false
			}`),
		},
	}
}
