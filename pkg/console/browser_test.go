//go:build ui

// Browser tests: the console in a real headless Chromium, driven with chromedp.
// Run them with `make test-ui`, which installs Chromium when it is missing. They
// write a screenshot of each page to $UI_OUT (default: a directory under the
// system's temporary directory, logged).

package console

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/skillbus/skillbus/internal/natstest"
)

type browser struct {
	t   *testing.T
	ctx context.Context
	out string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.NoSandbox, // root in CI containers
		chromedp.Flag("headless", true),
		chromedp.WindowSize(1400, 1000),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start Chromium: %v (make test-ui installs it)", err)
	}
	out := os.Getenv("UI_OUT")
	if out == "" {
		out = filepath.Join(os.TempDir(), "skillbus-console-ui")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, ctx: ctx, out: out}
}

func (b *browser) run(actions ...chromedp.Action) {
	b.t.Helper()
	if err := chromedp.Run(b.ctx, actions...); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	var png []byte
	b.run(chromedp.FullScreenshot(&png, 100)) // quality 100 makes a PNG
	p := filepath.Join(b.out, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", p)
}

// The payload tries every way a skill's output could run script in the page.
const hostileHTML = `<script>window.__owned=1</script><img src=x onerror="window.__owned=2">`

func TestBrowserLiveListRunPageAndConfirmation(t *testing.T) {
	f := startFleet(t, func(c *Config) {
		c.Token = "s3cret-0123456789"
		c.TraceURL = "http://localhost:16686/trace/{trace_id}"
	})
	b := newBrowser(t)

	// A trigger appears in the live list, and turns completed, without a reload.
	b.run(chromedp.Navigate(f.srv.URL+"/"), chromedp.WaitReady("#run-rows", chromedp.ByQuery),
		chromedp.Evaluate(`window.__sameDocument = true`, nil))
	// Let the page's EventSource connect before the trigger.
	b.run(chromedp.Poll(`document.readyState === "complete"`, nil))
	waitSubscribers(t, f.c, 1)
	exec := f.trigger("com.example.shout", "shout", hostileHTML)
	b.run(chromedp.WaitVisible(`#run-`+exec+`[data-state="completed"]`, chromedp.ByQuery))
	var same bool
	b.run(chromedp.Evaluate(`window.__sameDocument === true`, &same))
	if !same {
		t.Fatal("the page was reloaded to show the run")
	}
	// A run that fails turns red, live.
	failed := f.trigger("com.example.fail", "fails", "x")
	b.run(chromedp.WaitVisible(`#run-`+failed+`.state-failed`, chromedp.ByQuery))
	var red string
	b.run(chromedp.Evaluate(`getComputedStyle(document.querySelector("#run-`+failed+` td")).backgroundColor`, &red))
	if red != "rgb(254, 242, 242)" {
		t.Errorf("a failed run's row is %s, not red", red)
	}
	b.run(chromedp.Evaluate(`window.__sameDocument === true`, &same))
	if !same {
		t.Fatal("the page was reloaded to show the failure")
	}
	// Read in one step in the page: the live list redraws the counts as events come,
	// and a node found by one DevTools call can be gone by the next ("No node with
	// given id found").
	var count string
	b.run(chromedp.Evaluate(`document.querySelector('#counts a[data-state="completed"] .n').textContent`, &count))
	if count != "1" {
		t.Fatalf("completed count %q", count)
	}

	// The run page shows the plan's scores and the step's output, as text.
	b.run(chromedp.Navigate(f.srv.URL+"/runs/"+exec), chromedp.WaitVisible("#plan", chromedp.ByID))
	var score, output, stepOut string
	b.run(chromedp.Text(`#plan tr.selected td.score`, &score, chromedp.ByQuery),
		chromedp.Text(`#outputs`, &output, chromedp.ByID),
		chromedp.Text(`#steps pre.step-output`, &stepOut, chromedp.ByQuery))
	if score == "" || score == "0.000" {
		t.Errorf("the selected candidate's score is %q", score)
	}
	if !strings.Contains(output, hostileHTML[:30]) || !strings.Contains(stepOut, "<script>window.__owned=1</script>") {
		t.Errorf("outputs not shown as text:\n%s\n%s", output, stepOut)
	}
	var owned any
	var injected int
	b.run(chromedp.Evaluate(`window.__owned`, &owned),
		chromedp.Evaluate(`document.querySelectorAll("main script, main img").length`, &injected))
	if owned != nil || injected != 0 {
		t.Fatalf("the skill's output ran in the page: __owned=%v, %d elements injected", owned, injected)
	}
	b.screenshot("run")

	// The live list, with a failed and a paused run beside the completed one.
	gated := f.trigger("com.example.ship", "gated", "release 1.4")
	f.state(gated, StatePaused)
	b.run(chromedp.Navigate(f.srv.URL+"/"), chromedp.WaitVisible(`#run-`+gated+`[data-state="paused"]`, chromedp.ByQuery))
	b.screenshot("runs")

	// Sign in, and approve the confirmation in the page: the run resumes.
	b.run(chromedp.Navigate(f.srv.URL+"/login?next=/waiting"),
		chromedp.SendKeys(`input[name="name"]`, "grace", chromedp.ByQuery),
		chromedp.SendKeys(`input[name="token"]`, "s3cret-0123456789", chromedp.ByQuery),
		chromedp.Submit(`form.login`, chromedp.ByQuery),
		chromedp.WaitVisible(`#paused-`+gated, chromedp.ByID))
	b.screenshot("waiting")
	b.run(chromedp.SendKeys(`#paused-`+gated+` input[name="reason"]`, "ship it", chromedp.ByQuery),
		chromedp.Click(`#paused-`+gated+` button.approve`, chromedp.ByQuery),
		chromedp.WaitVisible(`#answers`, chromedp.ByID))
	f.state(gated, StateCompleted)
	var answers string
	b.run(chromedp.Navigate(f.srv.URL+"/runs/"+gated), chromedp.WaitVisible(`#result .state-completed`, chromedp.ByQuery),
		chromedp.Text(`#answers`, &answers, chromedp.ByID))
	if !strings.Contains(answers, "approved by grace — ship it") {
		t.Fatalf("answers: %q", answers)
	}

	// A repair proposed for a broken skill, approved in the page: the registry
	// publishes the new version and the parked run completes on it.
	broken := f.trigger("com.example.issue", "issue-title", "x")
	f.state(broken, StateRepairing)
	natstest.Eventually(t, 30*time.Second, func() bool {
		l, err := f.c.repairActions().List(f.ctx, "proposed")
		return err == nil && len(l) == 1
	}, "no repair was proposed")
	b.run(chromedp.Navigate(f.srv.URL+"/repairs"), chromedp.WaitVisible(`article.status-proposed pre.diff .add`, chromedp.ByQuery))
	b.screenshot("repairs")
	b.run(chromedp.Click(`article.status-proposed button.approve`, chromedp.ByQuery), chromedp.WaitVisible(`#decided`, chromedp.ByID))
	f.state(broken, StateCompleted)
	var versions int
	b.run(chromedp.Navigate(f.srv.URL+"/skills"), chromedp.WaitVisible(`#skill-issue-title`, chromedp.ByID),
		chromedp.Evaluate(`document.querySelectorAll("#skill-issue-title td:nth-child(7) div").length`, &versions))
	if versions < 2 {
		t.Errorf("the repaired skill keeps %d versions, want the repaired one beside the first", versions)
	}

	// The skills page, with the route form answered in place.
	b.run(chromedp.Navigate(f.srv.URL+"/skills"), chromedp.WaitVisible(`#skill-shout`, chromedp.ByID),
		chromedp.SendKeys(`#route-form input[name="type"]`, "com.example.shout", chromedp.ByQuery),
		chromedp.SendKeys(`#route-form input[name="text"]`, "say it loud", chromedp.ByQuery),
		chromedp.Click(`#route-form button`, chromedp.ByQuery),
		chromedp.WaitVisible(`#route-result table.candidates`, chromedp.ByQuery))
	var diag string
	b.run(chromedp.Text(`#problems`, &diag, chromedp.ByID))
	if !strings.Contains(diag, "broken/skill.yaml:4") {
		t.Errorf("diagnostics: %q", diag)
	}
	b.screenshot("skills")

	// The dead letter of the failed run, with the replay its replay form made.
	b.run(chromedp.Navigate(f.srv.URL+"/dlq"), chromedp.WaitVisible(`#dead-`+failed, chromedp.ByID),
		chromedp.Click(`#dead-`+failed+` button`, chromedp.ByQuery),
		chromedp.WaitVisible(`#replayed`, chromedp.ByID))
	var replays string
	b.run(chromedp.Text(`#dead-`+failed, &replays, chromedp.ByID))
	if !strings.Contains(replays, "#1 by grace") {
		t.Errorf("dead letter row: %q", replays)
	}
	b.screenshot("dlq")
}

// waitSubscribers waits until n pages follow the live list.
func waitSubscribers(t *testing.T, c *Console, n int) {
	t.Helper()
	natstest.Eventually(t, 20*time.Second, func() bool {
		c.hub.mu.Lock()
		defer c.hub.mu.Unlock()
		return len(c.hub.subs) >= n
	}, "no page follows the live list")
}
