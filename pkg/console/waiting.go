package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/run"
)

type waitingView struct {
	Error  string
	Paused []pausedView
}

type pausedView struct {
	run.Paused
	Skill string
}

// paused lists the executions waiting for a confirmation, oldest deadline first.
func (c *Console) paused(ctx context.Context) ([]pausedView, error) {
	b := c.cfg.Bus
	kv, err := b.KV(ctx, b.BucketRuns())
	if err != nil {
		return nil, err
	}
	lister, err := kv.ListKeysFiltered(ctx, events.RunsPausedFilter)
	if err != nil {
		return nil, err
	}
	var out []pausedView
	for k := range lister.Keys() {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var p pausedView
		if json.Unmarshal(e.Value(), &p.Paused) != nil || p.Kind != "" { // a sleep waits for nobody
			continue
		}
		var j events.Job
		_ = json.Unmarshal(p.Job, &j)
		p.Skill = j.Skill.Name
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TimeoutAt.Before(out[j].TimeoutAt) })
	return out, nil
}

func (c *Console) waitingPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), c.cfg.RequestTimeout)
	defer cancel()
	var v waitingView
	p, err := c.paused(ctx)
	if err != nil {
		v.Error = "Reading the paused runs: " + err.Error()
	}
	v.Paused = p
	c.render(w, r, "waiting", "Waiting for people", v)
}

// confirm answers the confirmation a run waits for, through run.Confirm (what
// `skillbus runs confirm` calls), recording the signed-in person as who answered.
func (c *Console) confirm(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	decision := r.PostFormValue("decision")
	if decision != "approve" && decision != "deny" {
		http.Error(w, `decision must be "approve" or "deny"`, http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.cfg.RequestTimeout)
	defer cancel()
	b := c.cfg.Bus
	kv, err := b.KV(ctx, b.BucketRuns())
	if err != nil {
		http.Error(w, "the runs bucket: "+err.Error(), http.StatusBadGateway)
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	step, err := run.Confirm(ctx, b, kv, run.Confirmation{ExecutionID: id, Step: r.PostFormValue("step"),
		Approved: decision == "approve", By: s.Who, Reason: reason, Source: "skillbus-console"})
	switch {
	case errors.Is(err, run.ErrNotPaused):
		http.Error(w, err.Error(), http.StatusConflict)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.cfg.Log.Info("console: confirmation answered", "who", s.Who, "execution", id, "step", step, "decision", decision, "reason", reason)
	http.Redirect(w, r, "/runs/"+url.PathEscape(id)+"?answered="+decision, http.StatusSeeOther)
}
