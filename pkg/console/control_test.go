package console

import (
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
)

// The run page's Cancel button and the skills page's Pause and Resume buttons act
// through package control, as the CLI does, recording who acted.
func TestRunsAreCancelledAndSkillsPausedFromThePages(t *testing.T) {
	t.Parallel()
	f := startFleet(t, func(c *Config) { c.Token = "s3cret-0123456789" })
	exec := f.trigger("com.example.ship", "gated", "v1.2")
	f.state(exec, StatePaused)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(u string, form url.Values) (int, string) {
		t.Helper()
		resp, err := c.PostForm(u, form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Location") + string(b)
	}
	if code, body := post(f.srv.URL+"/login", url.Values{"name": {"ada"}, "token": {"s3cret-0123456789"}}); code != http.StatusSeeOther {
		t.Fatalf("sign in: %d %s", code, body)
	}
	_, page := get(t, c, f.srv.URL+"/runs/"+exec)
	m := csrfRe.FindStringSubmatch(page)
	if m == nil || !strings.Contains(page, `action="/runs/`+exec+`/cancel"`) {
		t.Fatalf("the run page of a paused run has no cancel form:\n%s", page)
	}
	csrf := m[1]
	code, loc := post(f.srv.URL+"/runs/"+exec+"/cancel", url.Values{"csrf": {csrf}, "reason": {"wrong version"}})
	if code != http.StatusSeeOther || !strings.Contains(loc, "cancelled=") {
		t.Fatalf("cancel: %d %s", code, loc)
	}
	f.state(exec, StateCancelled)
	_, body := get(t, c, f.srv.URL+"/runs/"+exec)
	if !strings.Contains(body, `<span class="badge state-cancelled">cancelled</span>`) || !strings.Contains(body, "cancelled by ada: wrong version") ||
		strings.Contains(body, `action="/runs/`+exec+`/cancel"`) {
		t.Fatalf("the run page of the cancelled run:\n%s", body)
	}

	if code, loc := post(f.srv.URL+"/skills/shout/pause", url.Values{"csrf": {csrf}, "reason": {"freeze"}}); code != http.StatusSeeOther || !strings.Contains(loc, "paused+shout") {
		t.Fatalf("pause: %d %s", code, loc)
	}
	natstest.Eventually(t, 20*time.Second, func() bool {
		_, body := get(t, c, f.srv.URL+"/skills")
		return strings.Contains(body, `<span class="badge state-paused">paused</span> <span class="muted">by ada: freeze`) &&
			strings.Contains(body, `action="/skills/shout/resume"`)
	}, "the skills page does not show shout paused")
	if code, loc := post(f.srv.URL+"/skills/shout/resume", url.Values{"csrf": {csrf}}); code != http.StatusSeeOther || !strings.Contains(loc, "resumed+shout") {
		t.Fatalf("resume: %d %s", code, loc)
	}
	_, body = get(t, c, f.srv.URL+"/skills")
	if strings.Contains(body, "state-paused") {
		t.Fatal("the skills page still shows a paused skill after resume")
	}
}

// Cancelling an id that nothing on the bus knows of is a 404 that says so, not a
// failure of the bus (502), and records no cancel.
func TestCancellingAnUnknownRunIsNotFound(t *testing.T) {
	t.Parallel()
	f := startFleet(t, func(c *Config) { c.Token = "s3cret-0123456789" })
	c, csrf := signIn(t, f, "ada")
	resp, err := c.PostForm(f.srv.URL+"/runs/nosuchrun/cancel", url.Values{"csrf": {csrf}, "reason": {"typo"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "no such execution: nosuchrun") {
		t.Fatalf("cancel of an unknown run: %d %s", resp.StatusCode, b)
	}
	kv, err := f.b.KV(f.ctx, f.b.BucketRuns())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(f.ctx, events.RunCancelKey("nosuchrun")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a cancel was recorded for an unknown run: %v", err)
	}
}
