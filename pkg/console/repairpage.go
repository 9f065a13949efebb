package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/skillbus/skillbus/pkg/repair/service"
)

type repairsView struct {
	Error    string
	Status   string
	Statuses []string
	Repairs  []service.Summary
	Decided  string // the repair just decided here
	Verb     string // approved | rejected
}

func (c *Console) repairActions() service.Actions {
	return service.Actions{Bus: c.cfg.Bus, Source: "/skillbus/console"}
}

// repairsPage lists repairs, newest first, each proposal as a readable diff: what
// `skillbus repair list` and `show` print.
func (c *Console) repairsPage(w http.ResponseWriter, r *http.Request) {
	v := repairsView{Status: r.URL.Query().Get("status"), Decided: r.URL.Query().Get("decided"), Verb: r.URL.Query().Get("verb"),
		Statuses: []string{service.StatusProposed, service.StatusRequested, service.StatusApproved, service.StatusApplied,
			service.StatusRejected, service.StatusExpired, service.StatusFailed}}
	ctx, cancel := context.WithTimeout(r.Context(), c.cfg.RequestTimeout)
	defer cancel()
	list, err := c.repairActions().List(ctx, v.Status)
	if err != nil {
		v.Error = "Reading the repairs: " + err.Error()
	}
	v.Repairs = list
	c.render(w, r, "repairs", "Repairs", v)
}

// decideRepair approves or rejects a proposed repair through service.Actions (what
// `skillbus repair approve|reject` calls), recording the signed-in person as who
// decided.
func (c *Console) decideRepair(approve bool) func(http.ResponseWriter, *http.Request, *session) {
	return func(w http.ResponseWriter, r *http.Request, s *session) {
		id := r.PathValue("id")
		reason := strings.TrimSpace(r.PostFormValue("reason"))
		ctx, cancel := context.WithTimeout(r.Context(), c.cfg.RequestTimeout)
		defer cancel()
		var err error
		verb := "approved"
		if approve {
			_, err = c.repairActions().Approve(ctx, id, s.Who)
		} else {
			verb = "rejected"
			_, err = c.repairActions().Reject(ctx, id, s.Who, reason)
		}
		switch {
		case errors.Is(err, service.ErrNotFound):
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		case errors.Is(err, service.ErrNotProposed):
			http.Error(w, err.Error(), http.StatusConflict)
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		c.cfg.Log.Info("console: repair "+verb, "who", s.Who, "repair", id, "reason", reason)
		http.Redirect(w, r, "/repairs?"+url.Values{"decided": {id}, "verb": {verb}}.Encode(), http.StatusSeeOther)
	}
}

type diffLine struct {
	Class, Text string
}

// diffLines splits a unified diff into lines classed for display.
func diffLines(diff string) []diffLine {
	var out []diffLine
	for _, l := range strings.Split(strings.TrimRight(diff, "\n"), "\n") {
		class := "ctx"
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
			class = "file"
		case strings.HasPrefix(l, "@@"):
			class = "hunk"
		case strings.HasPrefix(l, "+"):
			class = "add"
		case strings.HasPrefix(l, "-"):
			class = "del"
		}
		out = append(out, diffLine{class, l})
	}
	return out
}
