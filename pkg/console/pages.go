package console

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

func staticHandler() http.Handler {
	sub, _ := fs.Sub(staticFS, "static")
	h := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.ServeHTTP(w, r)
	})
}

// pages holds each page's template: the layout with the page's "content".
type pages struct {
	byName map[string]*template.Template
	frag   *template.Template // the partials alone, for fragments
}

var funcs = template.FuncMap{
	"short": func(id string) string {
		if len(id) > 12 {
			return id[:12]
		}
		return id
	},
	"when": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.Local().Format("2006-01-02 15:04:05.000")
	},
	"ms": func(v float64) string {
		switch {
		case v == 0:
			return ""
		case v < 1:
			return strconv.FormatFloat(v, 'f', 2, 64) + " ms"
		case v < 1000:
			return strconv.FormatFloat(v, 'f', 1, 64) + " ms"
		default:
			return strconv.FormatFloat(v/1000, 'f', 2, 64) + " s"
		}
	},
	"pct": func(v float64) string { return strconv.FormatFloat(v*100, 'f', 0, 64) + "%" },
	"f3":  func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) },
	"f2":  func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) },
	"json": func(v any) string {
		return prettyJSON(v)
	},
	"join":      strings.Join,
	"difflines": diffLines,
	// excerpt shows a result excerpt (JSON that encoding/json wrote) with the
	// characters it escapes for HTML as themselves: the template escapes them.
	"excerpt": strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace,
	"dict": func(kv ...any) map[string]any {
		m := make(map[string]any, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	},
	"lower": strings.ToLower,
}

// prettyJSON indents v as JSON, at most 64 KiB of it. Characters that encoding/json
// escapes for HTML (<, >, &) are shown as themselves: the templates escape them.
func prettyJSON(v any) string {
	var raw []byte
	switch x := v.(type) {
	case json.RawMessage:
		raw = x
	case []byte:
		raw = x
	case string:
		raw = []byte(x)
	default:
		raw, _ = json.Marshal(v)
	}
	var out bytes.Buffer
	var val any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&val) == nil {
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if enc.Encode(val) != nil {
			out.Reset()
			out.Write(raw)
		}
	} else {
		out.Write(raw)
	}
	s := strings.TrimRight(out.String(), "\n")
	const limit = 64 << 10
	if len(s) > limit {
		return s[:limit] + fmt.Sprintf("\n… (%d more bytes)", len(s)-limit)
	}
	return s
}

func parsePages() (*pages, error) {
	base, err := template.New("layout").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	p := &pages{byName: map[string]*template.Template{}}
	if p.frag, err = base.Clone(); err != nil {
		return nil, err
	}
	for _, name := range []string{"runs", "run", "skills", "waiting", "login", "dlq", "repairs"} {
		t, err := base.Clone()
		if err != nil {
			return nil, err
		}
		if _, err := t.ParseFS(templateFS, "templates/"+name+".html"); err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		p.byName[name] = t
	}
	return p, nil
}

func (p *pages) fragment(w io.Writer, name string, data any) error {
	return p.frag.ExecuteTemplate(w, name, data)
}

// view is what the layout needs besides the page's own data.
type view struct {
	Title    string
	Path     string
	Session  *session
	ReadOnly bool // no token: nobody can act
	Waiting  int
	CaughtUp bool
	Data     any
}

// CanAct reports whether the viewer may act.
func (v view) CanAct() bool { return v.Session != nil }

// CSRF is the token forms carry.
func (v view) CSRF() string {
	if v.Session == nil {
		return ""
	}
	return v.Session.CSRF
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, page, title string, data any) {
	c.renderCode(w, r, http.StatusOK, page, title, data)
}

// renderCode is render answering with status code: the page's headers are set
// before the status is written, which sends them.
func (c *Console) renderCode(w http.ResponseWriter, r *http.Request, code int, page, title string, data any) {
	v := view{Title: title, Path: r.URL.Path, Session: c.session(r), ReadOnly: c.cfg.Token == "",
		Waiting: c.idx.Counts(Filter{})[StatePaused], CaughtUp: c.CaughtUp(), Data: data}
	var buf bytes.Buffer
	if err := c.pages.byName[page].ExecuteTemplate(&buf, "layout", v); err != nil {
		c.cfg.Log.Error("console: render", "page", page, "err", err)
		http.Error(w, "the page could not be rendered: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// parseFilter reads the runs filter of a request: skill, state, since and until
// (a duration back from now, like 1h, or an RFC 3339 time).
func parseFilter(r *http.Request) (Filter, error) {
	q := r.URL.Query()
	f := Filter{Skill: strings.TrimSpace(q.Get("skill")), State: q.Get("state")}
	if f.State != "" && stateIndex(f.State) == len(States) {
		return f, fmt.Errorf("state %q: want one of %s", f.State, strings.Join(States, ", "))
	}
	var err error
	if f.Since, err = parseWhen(q.Get("since")); err != nil {
		return f, fmt.Errorf("since: %w", err)
	}
	if f.Until, err = parseWhen(q.Get("until")); err != nil {
		return f, fmt.Errorf("until: %w", err)
	}
	return f, nil
}

func parseWhen(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither a duration back from now (like 30m or 2h) nor an RFC 3339 time (like 2026-01-02T15:04:05Z)", s)
	}
	return t, nil
}

type countView struct {
	State string
	N     int
	URL   string
}

func (c *Console) countsView(f Filter) []countView {
	n := c.idx.Counts(f)
	out := make([]countView, 0, len(States))
	for _, s := range States {
		g := f
		g.State = s
		out = append(out, countView{State: s, N: n[s], URL: filterURL(g, 0)})
	}
	return out
}

func filterURL(f Filter, before uint64) string {
	q := url.Values{}
	if f.Skill != "" {
		q.Set("skill", f.Skill)
	}
	if f.State != "" {
		q.Set("state", f.State)
	}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.UTC().Format(time.RFC3339))
	}
	if !f.Until.IsZero() {
		q.Set("until", f.Until.UTC().Format(time.RFC3339))
	}
	if before > 0 {
		q.Set("before", strconv.FormatUint(before, 10))
	}
	if len(q) == 0 {
		return "/"
	}
	return "/?" + q.Encode()
}

type runsView struct {
	Filter   Filter
	Since    string
	Until    string
	Error    string
	Skills   []string
	States   []string
	Page     Page
	Counts   []countView
	LiveURL  string
	NextURL  string
	NewerURL string
	Head     bool
}

func (c *Console) runsPage(w http.ResponseWriter, r *http.Request) {
	v := runsView{States: States, Skills: c.idx.Skills(), Since: r.URL.Query().Get("since"), Until: r.URL.Query().Get("until")}
	f, err := parseFilter(r)
	code := http.StatusOK
	if err != nil {
		v.Error = err.Error()
		code = http.StatusBadRequest
	}
	v.Filter = f
	before, _ := strconv.ParseUint(r.URL.Query().Get("before"), 10, 64)
	v.Page = c.idx.Query(f, before, c.cfg.PageSize)
	v.Counts = c.countsView(f)
	v.Head = before == 0
	live := strings.TrimPrefix(filterURL(f, 0), "/")
	v.LiveURL = "/live" + live
	if v.Page.Before > 0 {
		v.NextURL = filterURL(f, v.Page.Before)
	}
	if !v.Head {
		v.NewerURL = filterURL(f, 0)
	}
	c.renderCode(w, r, code, "runs", "Runs", v)
}
