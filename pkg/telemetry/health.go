package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check reports whether one thing a process needs is ready: nil when it is.
type Check func(ctx context.Context) error

// CheckTimeout bounds each readiness check.
const CheckTimeout = 2 * time.Second

// Health is the set of named readiness checks /readyz runs. The zero value has no
// checks and is ready; it is safe for concurrent use.
type Health struct {
	mu     sync.Mutex
	checks map[string]Check
}

// Add registers check under name, replacing any check of that name.
func (h *Health) Add(name string, check Check) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.checks == nil {
		h.checks = map[string]Check{}
	}
	h.checks[name] = check
}

// Remove unregisters the check of that name.
func (h *Health) Remove(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.checks, name)
}

// Result is the outcome of one check.
type Result struct {
	Name string
	Err  error
}

// Run runs every check, each within CheckTimeout, in name order, and reports
// whether all passed.
func (h *Health) Run(ctx context.Context) (ready bool, results []Result) {
	if h == nil {
		return true, nil
	}
	h.mu.Lock()

	names := make([]string, 0, len(h.checks))
	for n := range h.checks {
		names = append(names, n)
	}
	checks := make(map[string]Check, len(h.checks))
	for n, c := range h.checks {
		checks[n] = c
	}
	h.mu.Unlock()
	slices.Sort(names)
	ready = true
	results = make([]Result, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, CheckTimeout)
			defer cancel()
			results[i] = Result{Name: n, Err: checks[n](cctx)}
		})
	}
	wg.Wait()
	for _, r := range results {
		if r.Err != nil {
			ready = false
		}
	}
	return ready, results
}

// Handler serves /metrics from g, /readyz (200 when every check of ready passes,
// else 503) and /livez (200 while the process serves HTTP and every check of live
// passes, else 503: a liveness probe then restarts it). Each check is listed with its
// result, one a line; /livez with no check registered answers "ok".
func Handler(g prometheus.Gatherer, ready, live *Health) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) {
		ok, results := live.Run(r.Context())
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprint(w, report(results))
		if ok {
			fmt.Fprintln(w, "ok")
		} else {
			fmt.Fprintln(w, "not live")
		}
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ok, results := ready.Run(r.Context())
		if len(results) == 0 {
			// A process adds its readiness checks once connected: none yet is
			// still starting.
			ok, results = false, []Result{{Name: "start", Err: errors.New("starting: not connected yet")}}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprint(w, report(results))
		if ok {
			fmt.Fprintln(w, "ready")
		} else {
			fmt.Fprintln(w, "not ready")
		}
	})
	return mux
}

// report lists results one a line, "[+] name ok" or "[-] name: error".
func report(results []Result) string {
	var b strings.Builder
	for _, res := range results {
		if res.Err != nil {
			fmt.Fprintf(&b, "[-] %s: %s\n", res.Name, oneLine(res.Err.Error()))
		} else {
			fmt.Fprintf(&b, "[+] %s ok\n", res.Name)
		}
	}
	return b.String()
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// Flag is a readiness check that fails with a fixed reason until Set: for things a
// process reports itself, such as "catalog loaded".
type Flag struct {
	mu     sync.Mutex
	ready  bool
	reason string
}

// NewFlag returns a flag that is not ready, for reason.
func NewFlag(reason string) *Flag { return &Flag{reason: reason} }

// Set marks the flag ready (or not).
func (f *Flag) Set(ready bool) {
	f.mu.Lock()
	f.ready = ready
	f.mu.Unlock()
}

// Check is the flag as a Check.
func (f *Flag) Check(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ready {
		return errors.New(f.reason)
	}
	return nil
}
