package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/skillbus/skillbus/internal/otlp"
)

// tracesCommand is a trace viewer for a terminal: an OTLP/HTTP receiver that prints
// each trace as a tree once no span of it has arrived for --quiet. It needs no
// collector, no Jaeger and no Docker.
func tracesCommand(stdout, stderr io.Writer) *cobra.Command {
	var listen string
	var quiet time.Duration
	cmd := &cobra.Command{
		Use:   "traces",
		Short: "Receive traces over OTLP/HTTP and print each one as a tree",
		Long: `traces listens for OTLP/HTTP trace exports (http/protobuf, what skillbus's
processes send) and prints each trace as a tree of its spans — service, duration,
status, links — once no span of it has arrived for --quiet. Point the processes at it
with OTEL_EXPORTER_OTLP_ENDPOINT=http://<--listen>.`,
		Example: `  skillbus traces --listen 127.0.0.1:4318
  OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 skillbus dev --skills testdata/skills`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("--listen %s: %w", listen, err)
			}
			fmt.Fprintf(stderr, "receiving traces on http://%s (set OTEL_EXPORTER_OTLP_ENDPOINT=http://%s); Ctrl-C to stop\n", ln.Addr(), ln.Addr())
			v := &traceView{out: stdout, pending: map[string]*pendingTrace{}}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				spans, code, err := otlp.Decode(r)
				if err != nil {
					http.Error(w, err.Error(), code)
					return
				}
				v.add(spans)
				otlp.Respond(w)
			}), ReadHeaderTimeout: 10 * time.Second}
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			tick := time.NewTicker(quiet / 4)
			defer tick.Stop()
			for {
				select {
				case <-cmd.Context().Done():
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					_ = srv.Shutdown(ctx)
					v.flush(time.Time{})
					return nil
				case err := <-done:
					if errors.Is(err, http.ErrServerClosed) {
						return nil
					}
					return err
				case now := <-tick.C:
					v.flush(now.Add(-quiet))
				}
			}
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:4318", "address to receive OTLP/HTTP on (4318 is OTLP/HTTP's port)")
	// Longer than the OpenTelemetry SDK's default export delay (5 s,
	// OTEL_BSP_SCHEDULE_DELAY), so that a trace from separate processes, each
	// exporting on its own schedule, is printed as one tree.
	cmd.Flags().DurationVar(&quiet, "quiet", 6*time.Second, "print a trace once none of its spans has arrived for this long (more than the services' OTEL_BSP_SCHEDULE_DELAY, 5s by default)")
	return cmd
}

type pendingTrace struct {
	spans []otlp.Span
	last  time.Time
}

type traceView struct {
	out     io.Writer
	mu      sync.Mutex
	pending map[string]*pendingTrace
}

func (v *traceView) add(spans []otlp.Span) {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := time.Now()
	for _, s := range spans {
		p := v.pending[s.TraceID]
		if p == nil {
			p = &pendingTrace{}
			v.pending[s.TraceID] = p
		}
		p.spans = append(p.spans, s)
		p.last = now
	}
}

// flush prints the traces whose last span arrived before cutoff (every one, for a
// zero cutoff), oldest first.
func (v *traceView) flush(cutoff time.Time) {
	v.mu.Lock()
	var ready []*pendingTrace
	for id, p := range v.pending {
		if cutoff.IsZero() || p.last.Before(cutoff) {
			ready = append(ready, p)
			delete(v.pending, id)
		}
	}
	v.mu.Unlock()
	sort.Slice(ready, func(i, j int) bool { return ready[i].spans[0].Start.Before(ready[j].spans[0].Start) })
	for _, p := range ready {
		fmt.Fprint(v.out, renderTrace(p.spans))
	}
}

// renderTrace draws one trace: a header, then each span under its parent, with its
// service, duration, status and links.
func renderTrace(spans []otlp.Span) string {
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanID] = true
	}
	kids := map[string][]otlp.Span{}
	var roots []otlp.Span
	for _, s := range spans {
		if s.ParentSpanID == "" || !ids[s.ParentSpanID] {
			roots = append(roots, s)
		} else {
			kids[s.ParentSpanID] = append(kids[s.ParentSpanID], s)
		}
	}
	byStart := func(ss []otlp.Span) {
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].Start.Before(ss[j].Start) })
	}
	byStart(roots)
	var b strings.Builder
	fmt.Fprintf(&b, "trace %s (%d spans)\n", spans[0].TraceID, len(spans))
	var walk func(s otlp.Span, depth int)
	walk = func(s otlp.Span, depth int) {
		fmt.Fprintf(&b, "  %s%s  [%s] %s", strings.Repeat("  ", depth), s.Name, s.Service, s.End.Sub(s.Start).Round(time.Microsecond))
		if s.StatusCode == tracepb.Status_STATUS_CODE_ERROR {
			fmt.Fprintf(&b, "  ERROR %s", s.StatusMsg)
		}
		if s.ParentSpanID != "" && !ids[s.ParentSpanID] {
			fmt.Fprintf(&b, "  (parent %s not received)", s.ParentSpanID)
		}
		for _, l := range s.Links {
			fmt.Fprintf(&b, "  link %v→%s/%s", l.Attrs["skillbus.link.reason"], l.TraceID, l.SpanID)
		}
		b.WriteByte('\n')
		ks := kids[s.SpanID]
		byStart(ks)
		for _, k := range ks {
			walk(k, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}
