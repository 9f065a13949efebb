package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/skillbus/skillbus/pkg/dlq"
)

type dlqView struct {
	Error    string
	Skill    string
	Since    string
	Page     *dlq.Page
	NextURL  string
	Replayed string // the entry just replayed here
	NewExec  string // and its new execution
}

// dlqPage lists the dead-letter queue, oldest first, as `skillbus dlq list` does.
func (c *Console) dlqPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := dlqView{Skill: strings.TrimSpace(q.Get("skill")), Since: strings.TrimSpace(q.Get("since")),
		Replayed: q.Get("replayed"), NewExec: q.Get("execution")}
	f := dlq.Filter{Skill: v.Skill, Limit: c.cfg.PageSize}
	f.After, _ = strconv.ParseUint(q.Get("after"), 10, 64)
	var err error
	if f.Since, err = parseWhen(v.Since); err != nil {
		v.Error = "since: " + err.Error()
	}
	if v.Error == "" {
		ctx, cancel := context.WithTimeout(r.Context(), c.cfg.RequestTimeout)
		defer cancel()
		dq, _ := dlq.New(dlq.Config{Bus: c.cfg.Bus})
		v.Page, err = dq.List(ctx, f)
		switch {
		case errors.Is(err, dlq.ErrNoStream):
			v.Error = "There is no dead-letter stream on this server yet."
		case err != nil:
			v.Error = "Reading the dead-letter queue: " + err.Error()
		}
	}
	code := http.StatusOK
	if v.Error != "" {
		code = http.StatusBadRequest
	}
	if v.Page != nil && v.Page.Next > 0 {
		u := url.Values{"after": {strconv.FormatUint(v.Page.Next, 10)}}
		if v.Skill != "" {
			u.Set("skill", v.Skill)
		}
		if v.Since != "" {
			u.Set("since", v.Since)
		}
		v.NextURL = "/dlq?" + u.Encode()
	}
	c.renderCode(w, r, code, "dlq", "Dead letters", v)
}

// replay publishes a dead letter again through dlq.Queue.Replay (what `skillbus dlq
// replay` calls), recording the signed-in person as who asked.
func (c *Console) replay(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), c.cfg.RequestTimeout)
	defer cancel()
	dq, _ := dlq.New(dlq.Config{Bus: c.cfg.Bus, Source: "/skillbus/console"})
	opt := dlq.ReplayOptions{By: s.Who, Pin: r.PostFormValue("pin") == "on", Again: r.PostFormValue("again") == "on"}
	res, err := dq.Replay(ctx, id, opt)
	switch {
	case errors.Is(err, dlq.ErrNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	case errors.Is(err, dlq.ErrAmbiguous), errors.Is(err, dlq.ErrNotReplayable), errors.Is(err, dlq.ErrSkillNotFound):
		http.Error(w, err.Error(), http.StatusConflict)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	c.cfg.Log.Info("console: dead letter replayed", "who", s.Who, "entry", res.EntryID, "replay", res.Replay,
		"execution", res.ExecutionID, "pinned", res.Pinned, "existing", res.Existing)
	u := url.Values{"replayed": {res.EntryID}}
	if res.ExecutionID != "" {
		u.Set("execution", res.ExecutionID)
	}
	http.Redirect(w, r, "/dlq?"+u.Encode(), http.StatusSeeOther)
}
