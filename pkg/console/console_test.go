package console

import (
	"bufio"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/skillbus/skillbus/internal/natstest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*Server).startGoRoutine.func1"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"), goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"))
}

const hostile = `<script>alert("owned")</script>`

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestARunAppearsLiveAndItsPageExplainsIt(t *testing.T) {
	t.Parallel()
	f := startFleet(t, func(c *Config) { c.TraceURL = "http://jaeger.example/trace/{trace_id}" })
	// Open the live stream before the trigger: the run must arrive on it.
	resp, err := http.Get(f.srv.URL + "/live?skill=shout")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	frames := make(chan string, 64)
	go func() {
		defer close(frames)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			frames <- sc.Text()
		}
	}()
	exec := f.trigger("com.example.shout", "shout", hostile)
	deadline := time.After(30 * time.Second)
	var sawRow, sawCompleted bool
	for !sawCompleted {
		select {
		case line, ok := <-frames:
			if !ok {
				t.Fatal("the live stream ended")
			}
			if strings.Contains(line, `id="run-`+exec+`"`) {
				sawRow = true
				if strings.Contains(line, `data-state="completed"`) {
					sawCompleted = true
				}
			}
			if strings.Contains(line, "<script>") {
				t.Fatalf("unescaped script tag on the live stream: %s", line)
			}
		case <-deadline:
			t.Fatalf("the run never arrived completed on the live stream (row seen: %v)", sawRow)
		}
	}

	code, body := get(t, http.DefaultClient, f.srv.URL+"/")
	if code != 200 || !strings.Contains(body, `id="run-`+exec+`"`) || !strings.Contains(body, `<span class="n">1</span> completed`) {
		t.Fatalf("runs page (%d) lacks the run or its count:\n%s", code, body)
	}
	code, body = get(t, http.DefaultClient, f.srv.URL+"/runs/"+exec)
	if code != 200 {
		t.Fatalf("run page: %d\n%s", code, body)
	}
	for _, want := range []string{
		`<td class="num score">`, // the candidates table with scores
		"com.example.shout",      // the trigger's type
		`&lt;script&gt;alert(\&#34;owned\&#34;)&lt;/script&gt;`, // the output, escaped
		`<span class="badge state-completed">completed</span>`,
		`href="http://jaeger.example/trace/`,
		`<td>say</td>`, // the step timeline
	} {
		if !strings.Contains(body, want) {
			t.Errorf("run page lacks %q", want)
		}
	}
	if strings.Contains(body, hostile) || strings.Contains(body, "<script>alert") {
		t.Error("run page renders the skill's output unescaped")
	}
	if t.Failed() {
		t.Log(body)
	}
	// The plan's score of the primary is the one the router decided.
	r, _ := f.c.idx.Get(exec)
	d, _, err := f.b.Decision(f.ctx, r.ActivationID)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Candidates) == 0 {
		t.Fatalf("decision without candidates: %+v", d)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
}

func TestSkillsPageShowsTheCatalogProblemsAndRoutes(t *testing.T) {
	t.Parallel()
	f := startFleet(t, nil)
	exec := f.trigger("com.example.shout", "shout", "hi")
	f.state(exec, StateCompleted)
	natstest.Eventually(t, 20*time.Second, func() bool {
		_, body := get(t, http.DefaultClient, f.srv.URL+"/skills")
		return strings.Contains(body, `id="skill-shout"`) && strings.Contains(body, "skill.yaml:")
	}, "the skills page never listed shout and the broken skill's file:line")
	_, body := get(t, http.DefaultClient, f.srv.URL+"/skills")
	for _, want := range []string{"1.2.0", "<b>100%</b>", "broken/skill.yaml:"} {
		if !strings.Contains(body, want) {
			t.Errorf("skills page lacks %q\n%s", want, body)
		}
	}
	req, _ := http.NewRequest("GET", f.srv.URL+"/skills/route?type=com.example.shout&text=say+it", nil)
	req.Header.Set("HX-Request", "true")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "<dt>primary</dt><dd><b>shout</b>") || !strings.Contains(string(b), `class="num score"`) {
		t.Fatalf("route form answer:\n%s", b)
	}
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func TestActionsNeedTheTokenASessionAndTheCSRFToken(t *testing.T) {
	t.Parallel()
	f := startFleet(t, func(c *Config) { c.Token = "s3cret-0123456789" })
	exec := f.trigger("com.example.ship", "gated", "v1.2")
	f.state(exec, StatePaused)
	confirmURL := f.srv.URL + "/runs/" + exec + "/confirm"
	noRedirect := func(jar http.CookieJar) *http.Client {
		return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	post := func(c *http.Client, u string, form url.Values, hdr map[string]string) (int, string) {
		req, _ := http.NewRequest("POST", u, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	anon := noRedirect(nil)
	if code, body := post(anon, confirmURL, url.Values{"decision": {"approve"}}, nil); code != http.StatusUnauthorized {
		t.Fatalf("without a session: %d %s", code, body)
	}
	jar, _ := cookiejar.New(nil)
	c := noRedirect(jar)
	if code, _ := post(c, f.srv.URL+"/login", url.Values{"name": {"ada"}, "token": {"wrong"}}, nil); code != http.StatusUnauthorized {
		t.Fatalf("a wrong token signed in: %d", code)
	}
	if code, body := post(c, f.srv.URL+"/login", url.Values{"name": {"ada"}, "token": {"s3cret-0123456789"}, "next": {"/waiting"}}, nil); code != http.StatusSeeOther {
		t.Fatalf("sign in: %d %s", code, body)
	}
	_, page := get(t, c, f.srv.URL+"/waiting")
	m := csrfRe.FindStringSubmatch(page)
	if m == nil || !strings.Contains(page, `id="paused-`+exec+`"`) {
		t.Fatalf("the waiting page has no answer form for %s:\n%s", exec, page)
	}
	csrf := m[1]
	if code, _ := post(c, confirmURL, url.Values{"decision": {"approve"}}, nil); code != http.StatusForbidden {
		t.Fatalf("without the CSRF token: %d", code)
	}
	if code, _ := post(c, confirmURL, url.Values{"decision": {"approve"}, "csrf": {"forged"}}, nil); code != http.StatusForbidden {
		t.Fatalf("with a wrong CSRF token: %d", code)
	}
	if code, _ := post(c, confirmURL, url.Values{"decision": {"approve"}, "csrf": {csrf}}, map[string]string{"Sec-Fetch-Site": "cross-site"}); code != http.StatusForbidden {
		t.Fatalf("a cross-site post: %d", code)
	}
	if code, _ := post(c, confirmURL, url.Values{"decision": {"approve"}, "csrf": {csrf}}, map[string]string{"Origin": "http://evil.example"}); code != http.StatusForbidden {
		t.Fatalf("a post from another origin: %d", code)
	}
	f.state(exec, StatePaused) // nothing above answered it
	code, _ := post(c, confirmURL, url.Values{"decision": {"approve"}, "csrf": {csrf}, "reason": {"looks good"}}, map[string]string{"Sec-Fetch-Site": "same-origin"})
	if code != http.StatusSeeOther {
		t.Fatalf("approve: %d", code)
	}
	f.state(exec, StateCompleted)
	_, body := get(t, c, f.srv.URL+"/runs/"+exec)
	if !strings.Contains(body, "approved by <b>ada</b> — looks good") {
		t.Fatalf("the run page does not say who approved:\n%s", body)
	}
}

func TestAReadOnlyConsoleRefusesActions(t *testing.T) {
	t.Parallel()
	f := startFleet(t, nil)
	resp, err := http.PostForm(f.srv.URL+"/runs/x/confirm", url.Values{"decision": {"approve"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "--ui-token") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	resp, err = http.PostForm(f.srv.URL+"/login", url.Values{"name": {"ada"}, "token": {""}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("sign-in on a read-only console: %d", resp.StatusCode)
	}
}

func TestBadFiltersAndIDsAreClearErrors(t *testing.T) {
	t.Parallel()
	f := startFleet(t, nil)
	code, body := get(t, http.DefaultClient, f.srv.URL+"/?since=yesterday")
	if code != http.StatusBadRequest || !strings.Contains(body, "since: &#34;yesterday&#34; is neither a duration") {
		t.Fatalf("%d %s", code, body)
	}
	if code, _ := get(t, http.DefaultClient, f.srv.URL+"/runs/a.b"); code != http.StatusBadRequest {
		t.Fatalf("bad id: %d", code)
	}
	if code, _ := get(t, http.DefaultClient, f.srv.URL+"/runs/nosuchrun"); code != http.StatusNotFound {
		t.Fatalf("unknown run: %d", code)
	}
	// An error page is a page: HTML, never cached, like any other.
	for _, u := range []string{"/?since=yesterday", "/runs/a.b", "/runs/nosuchrun"} {
		resp, err := http.Get(f.srv.URL + u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if ct, cc := resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"); ct != "text/html; charset=utf-8" || cc != "no-store" {
			t.Errorf("%s: %d, Content-Type %q, Cache-Control %q", u, resp.StatusCode, ct, cc)
		}
	}
}

// signIn signs a client in and returns it with the CSRF token of its session.
func signIn(t *testing.T, f *fleet, name string) (*http.Client, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(f.srv.URL+"/login", url.Values{"name": {name}, "token": {"s3cret-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %d", resp.StatusCode)
	}
	_, page := get(t, c, f.srv.URL+"/waiting")
	m := csrfRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the page:\n%s", page)
	}
	return c, m[1]
}

func TestADeadLetterIsReplayedFromThePageWithWhoAsked(t *testing.T) {
	t.Parallel()
	f := startFleet(t, func(c *Config) { c.Token = "s3cret-0123456789" })
	exec := f.trigger("com.example.fail", "fails", "x")
	f.state(exec, StateFailed)
	var body string
	natstest.Eventually(t, 20*time.Second, func() bool {
		_, body = get(t, http.DefaultClient, f.srv.URL+"/dlq")
		return strings.Contains(body, `id="dead-`+exec+`"`)
	}, "the dead letter never appeared on /dlq")
	if !strings.Contains(body, "the upstream said no") {
		t.Fatalf("the entry lacks its reason:\n%s", body)
	}
	if n := strings.Count(body, "step explode: "); n != 1 {
		t.Errorf("the reason names its step %d times, want once:\n%s", n, body)
	}
	c, csrf := signIn(t, f, "linus")
	resp, err := c.PostForm(f.srv.URL+"/dlq/"+exec+"/replay", url.Values{"csrf": {"wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a replay without the CSRF token: %d", resp.StatusCode)
	}
	resp, err = c.PostForm(f.srv.URL+"/dlq/"+exec+"/replay", url.Values{"csrf": {csrf}, "pin": {"on"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || loc.Query().Get("execution") == "" {
		t.Fatalf("replay: %d, to %s", resp.StatusCode, loc)
	}
	// The replay runs (and fails again: the skill is still broken).
	f.state(loc.Query().Get("execution"), StateFailed)
	_, body = get(t, c, f.srv.URL+loc.String())
	if !strings.Contains(body, "#1 by <b>linus</b>") || !strings.Contains(body, `id="replayed"`) {
		t.Fatalf("the page does not say who replayed:\n%s", body)
	}
}

func TestARepairIsApprovedFromThePageAndPublishesTheNewVersion(t *testing.T) {
	t.Parallel()
	f := startFleet(t, func(c *Config) { c.Token = "s3cret-0123456789" })
	exec := f.trigger("com.example.issue", "issue-title", "x")
	f.state(exec, StateRepairing)
	var body string
	natstest.Eventually(t, 30*time.Second, func() bool {
		_, body = get(t, http.DefaultClient, f.srv.URL+"/repairs?status=proposed")
		return strings.Contains(body, `<span class="badge repair-proposed">proposed</span>`)
	}, "no repair was proposed")
	for _, want := range []string{`<span class="del">-      text: &#34;{{ fetch.titel }}&#34;</span>`, `<span class="add">&#43;      text: &#34;{{ fetch.title }}&#34;</span>`} {
		if !strings.Contains(body, want) {
			t.Fatalf("the proposal lacks %s:\n%s", want, body)
		}
	}
	id := regexp.MustCompile(`<article class="repair status-proposed" id="repair-([^"]+)"`).FindStringSubmatch(body)[1]
	c, csrf := signIn(t, f, "margaret")
	resp, err := c.PostForm(f.srv.URL+"/repairs/"+id+"/approve", url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("approve without the CSRF token: %d", resp.StatusCode)
	}
	resp, err = c.PostForm(f.srv.URL+"/repairs/"+id+"/approve", url.Values{"csrf": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve: %d", resp.StatusCode)
	}
	// The parked run completes on the new version, which the catalog serves.
	f.state(exec, StateCompleted)
	natstest.Eventually(t, 30*time.Second, func() bool {
		_, body = get(t, http.DefaultClient, f.srv.URL+"/repairs")
		return strings.Contains(body, `<span class="badge repair-applied">applied</span>`)
	}, "the repair was never applied")
	if !strings.Contains(body, "<b>margaret</b>") {
		t.Fatalf("the repair does not say who approved it:\n%s", body)
	}
	_, body = get(t, http.DefaultClient, f.srv.URL+"/runs/"+exec)
	if !strings.Contains(body, `href="/repairs#repair-`+id+`"`) || !strings.Contains(body, "Fix the build") {
		t.Fatalf("the run page lacks its repair or output:\n%s", body)
	}
}

// A request for a run holds no JetStream consumer after it is answered: 50
// requests for runs that do not exist leave the EVENTS stream with the consumers
// it had (they stayed five minutes each).
func TestRunPagesReleaseTheirConsumers(t *testing.T) {
	t.Parallel()
	f := startFleet(t, nil)
	evs, err := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
	if err != nil {
		t.Fatal(err)
	}
	consumers := func() int {
		info, err := evs.Info(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Consumers
	}
	base := consumers()
	for i := range 50 {
		if code, _ := get(t, http.DefaultClient, f.srv.URL+"/runs/nosuchrun"+strconv.Itoa(i)); code != http.StatusNotFound {
			t.Fatalf("unknown run: %d", code)
		}
	}
	natstest.Eventually(t, 5*time.Second, func() bool { return consumers() <= base }, "%d consumers on EVENTS after the requests, %d before", consumers(), base)
}
