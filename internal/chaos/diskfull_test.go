package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/pkg/run"
)

// The phase counts the triggers in flight while the store was full, following
// fallbacks, and the report says what happened — or, loudly,
// why the phase did not run.
func TestDiskFullCountsThePhasesTriggers(t *testing.T) {
	// sent is by trigger number; trigger 5 is another's.
	ts := []Trigger{{N: 0, ID: "done before", Execution: "e0"}, {N: 1, ID: "lost", Execution: "e1"}, {N: 2, ID: "twice", Execution: "e2"},
		{N: 3, ID: "fallback", Execution: "e3"}, {N: 6, ID: "after", Execution: "e4"}}
	sent := []time.Time{at(-20_000), at(-5_000), at(1_000), at(-2_000), {}, at(-3_000), at(60_000)}
	o := Outcomes{}
	for _, r := range []*run.Record{
		{ExecutionID: "e0", FinishedAt: at(-1)}, {ExecutionID: "e0", FinishedAt: at(30_000)}, // finished before the fill: not the phase's
		{ExecutionID: "e2", Status: run.StatusCompleted, FinishedAt: at(21_000)}, {ExecutionID: "e2", Status: run.StatusCompleted, FinishedAt: at(22_000)},
		{ExecutionID: "e3", Status: run.StatusFallback, Next: "e3b", FinishedAt: at(-1_000)},
		{ExecutionID: "e3b", Status: run.StatusCompleted, FinishedAt: at(25_000)}, {ExecutionID: "e3b", Status: run.StatusCompleted, FinishedAt: at(26_000)},
		{ExecutionID: "e4", FinishedAt: at(61_000)}, // published after the recovery
	} {
		o.Add(r)
	}
	d := DiskFull{Size: 1 << 30, Filled: at(0), Faulted: at(300), Freed: at(5_300), Recovered: at(20_000), Restarted: true, SelfWait: 15 * time.Second,
		Fault: "503 Service Unavailable: no space left on device", Unready: "[-] nats-server healthz: no space left on device"}
	d.count(ts, sent, o)
	if d.Triggers != 3 || d.Lost != 1 || d.Duplicates != 2 {
		t.Errorf("triggers %d, lost %d, duplicates %d; want 3, 1, 2", d.Triggers, d.Lost, d.Duplicates)
	}
	var b strings.Builder
	line := func(name string, v any, note string) { fmt.Fprintf(&b, "%s: %v (%s)\n", name, v, note) }
	d.print(line)
	for _, want := range []string{"tmpfs of 1 GiB", "/healthz failing 300ms later", "freed after 5.3s", "nats-server restarted (SIGTERM), taking writes 14.7s after",
		"disk full: lost: 1", "disk full: duplicate terminals: 2", "[-] nats-server healthz"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	(&DiskFull{Skipped: "mounting a tmpfs for the store needs root"}).print(line)
	if !strings.Contains(b.String(), "disk full: SKIPPED (mounting a tmpfs") {
		t.Errorf("a skipped phase is reported as:\n%s", b.String())
	}
}
