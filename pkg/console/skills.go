package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/nats-io/nats.go/micro"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/events/registryapi"
	"github.com/skillbus/skillbus/pkg/control"
	"github.com/skillbus/skillbus/pkg/registry"
	"github.com/skillbus/skillbus/pkg/selector"
)

type skillsView struct {
	Error    string
	Catalog  *registryapi.ListResponse
	Versions map[string][]registryapi.VersionInfo
	Stats    map[string][]VersionStats
	Route    *routeView // the route form's answer, when the page was asked without htmx
	// Paused are the paused skills (runs pause), by name; Done what an action
	// given on this page did.
	Paused map[string]*control.PausedSkill
	Done   string
}

func (c *Console) skillsPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), c.cfg.RequestTimeout)
	defer cancel()
	v := skillsView{Versions: map[string][]registryapi.VersionInfo{}, Stats: map[string][]VersionStats{},
		Paused: map[string]*control.PausedSkill{}, Done: r.URL.Query().Get("done")}
	if ctl, err := control.New(ctx, c.cfg.Bus); err == nil {
		if paused, err := ctl.Paused(ctx); err == nil {
			for name, p := range paused {
				v.Paused[name] = &p
			}
		}
	}
	for _, s := range c.idx.Stats() {
		v.Stats[s.Skill] = append(v.Stats[s.Skill], s)
	}
	cl := registry.NewClient(c.cfg.Bus.Conn(), c.cfg.Bus.Subjects.Prefix)
	list, err := cl.List(ctx)
	switch {
	case errors.Is(err, registry.ErrNoService):
		v.Error = "No skillbus-registry service answers, so the catalog cannot be shown. Is a registry running?"
	case err != nil:
		v.Error = "Asking the registry: " + err.Error()
	default:
		v.Catalog = list
		for _, s := range list.Skills {
			if g, err := cl.Get(ctx, registryapi.GetRequest{Name: s.Name}); err == nil {
				v.Versions[s.Name] = g.Versions
			}
		}
	}
	c.render(w, r, "skills", "Skills", v)
}

type routeView struct {
	Text, Type string
	Error      string
	Decision   *selector.Decision
}

// routeForm asks the live router which skills a request would activate, and why:
// what `skillbus route --explain` prints.
func (c *Console) routeForm(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := routeView{Text: strings.TrimSpace(q.Get("text")), Type: strings.TrimSpace(q.Get("type"))}
	if v.Text == "" && v.Type == "" {
		v.Error = "Type a request, or a CloudEvent type, or both."
	} else {
		ctx, cancel := context.WithTimeout(r.Context(), c.cfg.RequestTimeout)
		defer cancel()
		d, err := c.route(ctx, events.RouteRequest{Type: v.Type, Text: v.Text})
		if err != nil {
			v.Error = err.Error()
		}
		v.Decision = d
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if r.Header.Get("HX-Request") == "" {
		c.render(w, r, "skills", "Route", skillsView{Route: &v})
		return
	}
	if err := c.pages.fragment(w, "route-result", v); err != nil {
		c.cfg.Log.Error("console: render route", "err", err)
	}
}

func (c *Console) route(ctx context.Context, req events.RouteRequest) (*selector.Decision, error) {
	body, _ := json.Marshal(req)
	msg, err := c.cfg.Bus.Request(ctx, c.cfg.Bus.Subjects.Router(events.RouterEndpointRoute), body)
	if err != nil {
		return nil, fmt.Errorf("asking the router: %w (is a router running?)", err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return nil, fmt.Errorf("router: %s", msg.Header.Get(micro.ErrorHeader))
	}
	var d selector.Decision
	if err := json.Unmarshal(msg.Data, &d); err != nil {
		return nil, fmt.Errorf("the router answered something that is not a decision: %w", err)
	}
	return &d, nil
}
