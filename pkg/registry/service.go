package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/skill"
)

// StateRemoved is the state of a skill no longer in the catalog whose version was
// asked for by digest: the version is still kept for pinned runs.
const StateRemoved = "removed"

// requestTimeout bounds the work of one service request.
const requestTimeout = 30 * time.Second

// notFoundError is a 404.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

// serve adds the skillbus-registry micro service on the registry's connection.
func (r *Registry) serve(ctx context.Context) (micro.Service, error) {
	b := r.cfg.Bus
	prefix := b.Config().Prefix
	svc, err := b.AddService(micro.Config{
		Name:        ServiceName,
		Version:     ServiceVersion,
		Description: "skillbus skill catalog: list, get, search and validate skills; publish repairs",
		Metadata:    map[string]string{"prefix": prefix, "roots": strings.Join(r.cfg.Roots, ",")},
	})
	if err != nil {
		return nil, fmt.Errorf("registry: service: %w", err)
	}
	g := svc.AddGroup(events.Subjects{Prefix: prefix}.Service(events.ServiceRegistry))
	endpoints := []struct {
		name, desc string
		h          func(context.Context, []byte) (any, error)
	}{
		{EndpointList, "every skill in the catalog, with its state and diagnostics", r.handleList},
		{EndpointGet, "one skill: metadata, workflow, versions, optionally its body", r.handleGet},
		{EndpointSearch, "skills by text and/or trigger type", r.handleSearch},
		{EndpointValidate, "validate skill files sent in the request", r.handleValidate},
		{EndpointRepair, "publish an approved repair of a skill as its new version", r.handleRepair},
	}
	for _, ep := range endpoints {
		h := ep.h
		err := g.AddEndpoint(ep.name, micro.HandlerFunc(func(req micro.Request) {
			rctx, cancel := context.WithTimeout(ctx, requestTimeout)
			defer cancel()
			resp, err := h(rctx, req.Data())
			if err != nil {
				r.respondError(req, err)
				return
			}
			if err := req.RespondJSON(resp); err != nil {
				r.cfg.Log.Error("registry: respond", "endpoint", req.Subject(), "err", err)
			}
		}), micro.WithEndpointMetadata(map[string]string{"description": ep.desc}))
		if err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("registry: service endpoint %s: %w", ep.name, err)
		}
	}
	return svc, nil
}

func (r *Registry) respondError(req micro.Request, err error) {
	var bad *BadRequestError
	var nf *notFoundError
	code := "500"
	switch {
	case errors.As(err, &bad):
		code = "400"
	case errors.As(err, &nf):
		code = "404"
	default:
		r.cfg.Log.Error("registry: request failed", "subject", req.Subject(), "err", err)
	}
	body, _ := json.Marshal(ErrorResponse{Code: code, Error: err.Error()})
	// A header value must be one line.
	desc := strings.ReplaceAll(err.Error(), "\n", "; ")
	_ = req.Error(code, desc, body)
}

func decode(data []byte, v any) error {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("request is not the JSON this endpoint takes: %v", err)
	}
	return nil
}

func (r *Registry) handleList(_ context.Context, data []byte) (any, error) {
	var req ListRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	return r.List(), nil
}

func (r *Registry) handleSearch(_ context.Context, data []byte) (any, error) {
	var req SearchRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	sn := r.snap.Load()
	res, err := Search(sn.skills, req)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	for i := range res {
		if k, ok := sn.byName[skill.NormalizeName(res[i].Name)]; ok {
			res[i].SkillInfo = sn.infos[k]
		}
	}
	return &SearchResponse{Results: res}, nil
}

func (r *Registry) handleValidate(_ context.Context, data []byte) (any, error) {
	var req ValidateRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	return Validate(req, r.cfg.Load)
}

func (r *Registry) handleGet(ctx context.Context, data []byte) (any, error) {
	var req GetRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	return r.Get(ctx, req)
}

// Get answers the service's get endpoint: one skill, or one kept version of it.
func (r *Registry) Get(ctx context.Context, req GetRequest) (*GetResponse, error) {
	if req.Name == "" {
		return nil, badRequest("get: name is required")
	}
	if !skill.ValidName(req.Name) {
		return nil, badRequest("get: %q is not a skill name (lowercase letters, digits, '-' and '_')", req.Name)
	}
	if strings.ContainsAny(req.Digest, ".*> ") {
		return nil, badRequest("get: %q is not a digest", req.Digest)
	}
	sn := r.snap.Load()
	var s *skill.Skill
	var info SkillInfo
	name := req.Name
	if k, ok := sn.byName[skill.NormalizeName(req.Name)]; ok {
		s, info, name = sn.skills[k], sn.infos[k], sn.skills[k].Name
	}
	if req.Digest != "" && (s == nil || s.Digest != req.Digest) {
		v, err := r.version(ctx, name, req.Digest)
		if err != nil {
			return nil, err
		}
		if s == nil {
			info = infoOf(v)
			info.State = StateRemoved
		} else {
			st, ds, ne, nw := info.State, info.Diagnostics, info.Errors, info.Warnings
			info = infoOf(v)
			info.State, info.Diagnostics, info.Errors, info.Warnings = st, ds, ne, nw
		}
		s = v
	}
	if s == nil {
		msg := fmt.Sprintf("get: skill %q is not in the catalog", req.Name)
		if c := skill.Closest(req.Name, slices.Collect(maps.Keys(sn.byName))); c != "" {
			msg += "; did you mean " + sn.skills[sn.byName[c]].Name + "?"
		}
		return nil, &notFoundError{msg}
	}
	out := *s
	if req.Body {
		body, err := r.files.Body(ctx, s)
		if err != nil {
			return nil, err
		}
		out.Body = body
	} else {
		out.Body = ""
	}
	versions, err := r.Versions(ctx, s.Name)
	if err != nil {
		return nil, err
	}
	for i := range versions {
		versions[i].Current = info.State != StateRemoved && versions[i].Digest == info.Digest
	}
	return &GetResponse{Skill: &out, Info: info, Versions: versions}, nil
}

// version reads a kept version from the bucket.
func (r *Registry) version(ctx context.Context, name, digest string) (*skill.Skill, error) {
	e, err := r.kv.Get(ctx, catalog.VersionKey(name, digest))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, &notFoundError{fmt.Sprintf("get: skill %q has no kept version %s", name, digest)}
	}
	if err != nil {
		return nil, err
	}
	var s skill.Skill
	if err := json.Unmarshal(e.Value(), &s); err != nil {
		return nil, fmt.Errorf("get: %s does not decode: %w", e.Key(), err)
	}
	return &s, nil
}

// Versions lists the kept versions of a skill, newest first.
func (r *Registry) Versions(ctx context.Context, name string) ([]VersionInfo, error) {
	entries, err := readEntries(ctx, r.kv, catalog.VersionKey(name, "*"), false)
	if err != nil {
		return nil, fmt.Errorf("registry: versions of %s: %w", name, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Revision() > entries[j].Revision() })
	out := make([]VersionInfo, 0, len(entries))
	for _, e := range entries {
		_, digest, _ := catalog.ParseVersionKey(e.Key())
		var v struct {
			Version string `json:"version"`
		}
		_ = json.Unmarshal(e.Value(), &v)
		out = append(out, VersionInfo{Digest: digest, Version: v.Version, Published: e.Created()})
	}
	return out, nil
}
