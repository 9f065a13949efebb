package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/control"
)

// The console's execution controls go through package control, as `skillbus runs
// cancel`, `runs pause` and `runs resume` do: recorded the same way, with who acted.

func (c *Console) controller(w http.ResponseWriter, r *http.Request) (*control.Controller, context.Context, context.CancelFunc, bool) {
	ctx, cancel := context.WithTimeout(r.Context(), c.cfg.RequestTimeout)
	ctl, err := control.New(ctx, c.cfg.Bus)
	if err != nil {
		cancel()
		http.Error(w, err.Error(), http.StatusBadGateway)
		return nil, nil, nil, false
	}
	return ctl, ctx, cancel, true
}

// cancelRun cancels one run (the run page's Cancel button).
func (c *Console) cancelRun(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	if err := events.CheckToken("execution id", id); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ctl, ctx, cancel, ok := c.controller(w, r)
	if !ok {
		return
	}
	defer cancel()
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	res, err := ctl.Cancel(ctx, id, control.Request{By: s.Who, Reason: reason, Source: "skillbus-console"})
	if errors.Is(err, control.ErrNoExecution) {
		// The bus answered: nothing knows of the id. Not a failure of the bus.
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	c.cfg.Log.Info("console: run cancelled", "who", s.Who, "execution", res.ExecutionID, "state", res.State, "outcome", res.Outcome, "reason", reason)
	http.Redirect(w, r, "/runs/"+url.PathEscape(res.ExecutionID)+"?cancelled="+url.QueryEscape(res.String()), http.StatusSeeOther)
}

// skillControl pauses or resumes a skill, or cancels its runs (the skills page's
// buttons).
func (c *Console) skillControl(action string) func(http.ResponseWriter, *http.Request, *session) {
	return func(w http.ResponseWriter, r *http.Request, s *session) {
		name := r.PathValue("name")
		if err := events.CheckToken("skill", name); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ctl, ctx, cancel, ok := c.controller(w, r)
		if !ok {
			return
		}
		defer cancel()
		reason := strings.TrimSpace(r.PostFormValue("reason"))
		req := control.Request{By: s.Who, Reason: reason, Source: "skillbus-console"}
		var note string
		switch action {
		case "pause":
			paused, err := ctl.Pause(ctx, name, req)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			note = "paused " + name
			if !paused {
				note = name + " was paused already"
			}
		case "resume":
			n, was, err := ctl.Resume(ctx, name, req)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			note = fmt.Sprintf("resumed %s: %d held runs released", name, n)
			if !was {
				note = name + " was not paused"
			}
		case "cancel":
			cs, err := ctl.CancelSkill(ctx, name, timeZero, req)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			note = fmt.Sprintf("cancelled %d runs of %s", len(cs), name)
		}
		c.cfg.Log.Info("console: skill "+action, "who", s.Who, "skill", name, "reason", reason, "result", note)
		http.Redirect(w, r, "/skills?done="+url.QueryEscape(note)+"#skill-"+url.PathEscape(name), http.StatusSeeOther)
	}
}

var timeZero time.Time // no bound: every run of the skill that has not ended
