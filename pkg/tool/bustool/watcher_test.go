package bustool_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/bustool"
)

func TestWatcher(t *testing.T) {
	_, nc := start(t)
	prefix := uniquePrefix()
	var mu sync.Mutex
	var changes [][]string
	w, err := bustool.NewWatcher(nc, bustool.WatcherConfig{
		Config:      bustool.Config{Prefix: prefix},
		Interval:    time.Hour, // only on demand here
		MinInterval: time.Nanosecond,
		Base:        []tool.Tool{tool.Echo()},
		Log:         discard(),
		OnChange: func(s *tool.Set) {
			mu.Lock()
			defer mu.Unlock()
			changes = append(changes, s.Names())
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if diff := cmp.Diff([]string{"echo"}, w.Set().Names()); diff != "" {
		t.Errorf("before any service (-want +got):\n%s", diff)
	}

	// A service appears; a job needing its tool finds it at once.
	srv, err := bustool.Serve(nc, bustool.ServerConfig{Prefix: prefix},
		bustool.Def{Tool: modal("slugify", nil)}, bustool.Def{Tool: modal("echo", nil)})
	if err != nil {
		t.Fatal(err)
	}
	set := w.Ensure(t.Context(), "slugify")
	if diff := cmp.Diff([]string{"echo", "slugify"}, set.Names()); diff != "" {
		t.Errorf("after Ensure (-want +got):\n%s", diff)
	}
	if echo, _ := set.Lookup("echo"); echo != nil {
		if _, isBus := echo.(*bustool.Tool); isBus {
			t.Error("the bus tool echo replaced the worker's own")
		}
	}
	if got := w.Tools(); len(got) != 2 {
		t.Errorf("Tools() = %d tools, want both the service serves", len(got))
	}
	// Present tools need no discovery.
	if again := w.Ensure(t.Context(), "slugify", "echo"); again != set {
		t.Error("Ensure made a new set although nothing was missing")
	}

	// The service goes away; the next refresh drops its tools.
	if err := srv.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := w.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"echo"}, w.Set().Names()); diff != "" {
		t.Errorf("after the service stopped (-want +got):\n%s", diff)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([][]string{{"echo", "slugify"}, {"echo"}}, changes); diff != "" {
		t.Errorf("OnChange calls (-want +got):\n%s", diff)
	}
}

// TestWatcherPeriodic finds a service that starts later without being asked.
func TestWatcherPeriodic(t *testing.T) {
	_, nc := start(t)
	prefix := uniquePrefix()
	w, err := bustool.NewWatcher(nc, bustool.WatcherConfig{
		Config:   bustool.Config{Prefix: prefix, DiscoverStall: 10 * time.Millisecond},
		Interval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	serve(t, nc, bustool.ServerConfig{Prefix: prefix}, bustool.Def{Tool: modal("late", nil)})
	natstest.Eventually(t, 10*time.Second, func() bool {
		_, ok := w.Set().Lookup("late")
		return ok
	}, "the watcher did not find the tool of a service started later")
}

// TestWatcherRefreshCoalesces runs many overlapping refreshes; each sees a
// discovery that started after it was asked, and none fails.
func TestWatcherRefreshCoalesces(t *testing.T) {
	_, nc := start(t)
	prefix := uniquePrefix()
	serve(t, nc, bustool.ServerConfig{Prefix: prefix}, bustool.Def{Tool: modal("x", nil)})
	w, err := bustool.NewWatcher(nc, bustool.WatcherConfig{Config: bustool.Config{Prefix: prefix, DiscoverStall: 5 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if err := w.Refresh(t.Context()); err != nil {
				t.Error(err)
			}
			if !slices.Contains(w.Set().Names(), "x") {
				t.Error("a refresh returned before the tool was found")
			}
		})
	}
	wg.Wait()
	w.Stop() // without Start
}

func TestWatcherStopsWithContext(t *testing.T) {
	_, nc := start(t)
	w, err := bustool.NewWatcher(nc, bustool.WatcherConfig{Interval: time.Millisecond, Config: bustool.Config{Prefix: uniquePrefix()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err == nil {
		t.Error("a second Start succeeded")
	}
	cancel()
	w.Stop()
	w.Stop()
}

func TestWatcherBaseConflict(t *testing.T) {
	_, nc := start(t)
	if _, err := bustool.NewWatcher(nc, bustool.WatcherConfig{Base: []tool.Tool{tool.Echo(), tool.Echo()}}); err == nil {
		t.Error("NewWatcher accepted two base tools of one name")
	}
}
