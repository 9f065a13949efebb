package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/selector"
)

// The skillbus-router service answers "how would you route this?" with the live
// catalog, results and workers, publishing nothing.
const (
	ServiceName    = "skillbus-router"
	ServiceVersion = "1.0.0"
	EndpointRoute  = events.RouterEndpointRoute
)

func (r *Router) startService(ctx context.Context) error {
	prefix := r.cfg.Bus.Config().Prefix
	svc, err := r.cfg.Bus.AddService(micro.Config{
		Name:        ServiceName,
		Version:     ServiceVersion,
		Description: "skillbus router: explain how a request would be routed",
		Metadata:    map[string]string{"prefix": prefix},
	})
	if err != nil {
		return fmt.Errorf("service: %w", err)
	}
	g := svc.AddGroup(events.Subjects{Prefix: prefix}.Service(events.ServiceRouter))
	err = g.AddEndpoint(EndpointRoute, micro.HandlerFunc(func(req micro.Request) {
		rctx, cancel := context.WithTimeout(ctx, r.cfg.RecallTimeout+time.Second)
		defer cancel()
		d, err := r.handleRoute(rctx, req.Data())
		if err != nil {
			code := "400"
			var unknown *selector.UnknownSkillError
			if errors.As(err, &unknown) {
				code = "404"
			}
			_ = req.Error(code, strings.ReplaceAll(err.Error(), "\n", "; "), nil)
			return
		}
		_ = req.RespondJSON(d)
	}))
	if err != nil {
		_ = svc.Stop()
		return fmt.Errorf("service endpoint: %w", err)
	}
	r.svc = svc
	return nil
}

func (r *Router) stopService() {
	if r.svc != nil {
		_ = r.svc.Stop()
		r.svc = nil
	}
}

func (r *Router) handleRoute(ctx context.Context, body []byte) (*selector.Decision, error) {
	var rr events.RouteRequest
	if err := json.Unmarshal(body, &rr); err != nil {
		return nil, fmt.Errorf("route request is not valid JSON: %w", err)
	}
	req := selector.Request{Type: rr.Type, Skill: rr.Skill, Text: rr.Text}
	var data any
	if len(rr.Data) > 0 {
		var err error
		if req.Data, data, err = RequestData(rr.Data); err != nil {
			return nil, fmt.Errorf("route request: %w", err)
		}
		if req.Text == "" {
			req.Text = textOf(req.Data, r.cfg.TextFields)
		}
	} else if req.Text != "" && (req.Type == "" || req.Type == selector.RequestType) {
		// Text alone (the console's route form, route TEXT) is the request a
		// client sends as io.skillbus.request, its text in the first text field:
		// the skills it reaches get that data, and those that refuse it are not
		// chosen, as for the trigger.
		req.Data = map[string]any{textFieldsOr(r.cfg.TextFields)[0]: req.Text}
		data = req.Data
	}
	return r.decide(ctx, &trigger{req: req, e: &bus.Binary{Type: req.Type}, data: data})
}
