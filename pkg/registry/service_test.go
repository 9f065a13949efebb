package registry_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/events/registryapi"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/registry"
)

// served starts a registry over some skills and returns a client of its service.
func served(t *testing.T) (*env, *registry.Registry, *registry.Client) {
	t.Helper()
	e := setup(t)
	write(t, filepath.Join(e.dir, "triage-issue", "SKILL.md"), "---\nname: triage-issue\ndescription: Labels and routes new GitHub issues.\n"+
		"triggers: [com.github.issues.opened]\ntags: [github, triage]\nexamples:\n  positive: [label this bug report]\n---\n\n# Triage\n\nRead the issue, pick labels, assign an owner and explain the choice.\n")
	write(t, filepath.Join(e.dir, "deploy", "SKILL.md"), "---\nname: deploy\ndescription: Deploys the service to staging.\n"+
		"triggers: [com.github.push, io.skillbus.release.tagged]\ntags: [release]\n---\n\n# Deploy\n\nBuild, push the image, roll out to staging and watch the health checks.\n")
	write(t, filepath.Join(e.dir, "broken", "SKILL.md"), "---\nname: broken\n---\n")
	reg, _ := e.started(registry.Config{})
	return e, reg, registry.NewClient(e.b.NC, "")
}

func TestServiceList(t *testing.T) {
	t.Parallel()
	e, _, c := served(t)
	resp, err := c.List(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.Skills {
		names = append(names, s.Name)
		if s.State != registry.StateOK || s.Digest == "" {
			t.Errorf("%s: %+v", s.Name, s)
		}
	}
	if !slices.Equal(names, []string{"deploy", "triage-issue"}) {
		t.Errorf("skills %v", names)
	}
	// The skill that never validated is a problem of the catalog, with its file.
	if !strings.Contains(resp.Problems.String(), filepath.Join("broken", "SKILL.md")) {
		t.Errorf("problems: %v", resp.Problems)
	}
}

func TestServiceGet(t *testing.T) {
	t.Parallel()
	e, _, c := served(t)
	resp, err := c.Get(e.ctx, registry.GetRequest{Name: "triage_issue"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Skill.Name != "triage-issue" || resp.Skill.Body != "" || len(resp.Versions) != 1 || !resp.Versions[0].Current {
		t.Fatalf("get: %+v", resp)
	}
	old := resp.Skill.Digest
	if _, err := c.Get(e.ctx, registry.GetRequest{Name: "triage-isue"}); err == nil || !strings.Contains(err.Error(), `skill "triage-isue" is not in the catalog; did you mean triage-issue?`) {
		t.Errorf("get of a misspelt name: %v", err)
	}
	withBody, err := c.Get(e.ctx, registry.GetRequest{Name: "triage-issue", Body: true})
	if err != nil || !strings.Contains(withBody.Skill.Body, "pick labels") {
		t.Fatalf("get with body: %+v, %v", withBody, err)
	}

	// After an edit: two versions, and the old one by digest, body and all.
	write(t, filepath.Join(e.dir, "triage-issue", "SKILL.md"), "---\nname: triage-issue\ndescription: Edited.\n---\n\n# Triage\n\nThe new instructions, long enough for the length check of the validator.\n")
	natstest.Eventually(t, 20*time.Second, func() bool {
		resp, err = c.Get(e.ctx, registry.GetRequest{Name: "triage-issue"})
		return err == nil && resp.Skill.Digest != old
	}, "the edit never showed: %+v, %v", resp, err)
	if len(resp.Versions) != 2 || !resp.Versions[0].Current || resp.Versions[1].Digest != old {
		t.Errorf("versions after the edit: %+v", resp.Versions)
	}
	prev, err := c.Get(e.ctx, registry.GetRequest{Name: "triage-issue", Digest: old, Body: true})
	if err != nil || prev.Skill.Description != "Labels and routes new GitHub issues." || !strings.Contains(prev.Skill.Body, "pick labels") {
		t.Fatalf("the old version: %+v, %v", prev, err)
	}
}

func TestServiceSearch(t *testing.T) {
	t.Parallel()
	e, _, c := served(t)
	tests := []struct {
		req  registry.SearchRequest
		want []string
	}{
		{registry.SearchRequest{Query: "github"}, []string{"triage-issue", "deploy"}}, // tag beats trigger
		{registry.SearchRequest{Query: "label bug"}, []string{"triage-issue"}},
		{registry.SearchRequest{Query: "staging"}, []string{"deploy"}},
		{registry.SearchRequest{Query: "stag"}, []string{"deploy"}}, // a prefix
		{registry.SearchRequest{Query: "kubernetes"}, nil},
		{registry.SearchRequest{Trigger: "com.github.push"}, []string{"deploy"}},
		{registry.SearchRequest{Trigger: "com.github.>"}, []string{"deploy", "triage-issue"}},
		{registry.SearchRequest{Trigger: "com.*.push"}, []string{"deploy"}},
		{registry.SearchRequest{Query: "github", Trigger: "com.github.issues.opened"}, []string{"triage-issue"}},
		{registry.SearchRequest{Query: "github", Limit: 1}, []string{"triage-issue"}},
	}
	for _, tt := range tests {
		resp, err := c.Search(e.ctx, tt.req)
		if err != nil {
			t.Errorf("%+v: %v", tt.req, err)
			continue
		}
		var got []string
		for _, r := range resp.Results {
			got = append(got, r.Name)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%+v: got %v, want %v", tt.req, got, tt.want)
		}
	}
}

func TestServiceValidate(t *testing.T) {
	t.Parallel()
	e, _, c := served(t)
	// One skill directory.
	resp, err := c.Validate(e.ctx, registry.ValidateRequest{Files: map[string]string{
		"SKILL.md":        "---\nname: lint\ndescription: Lints.\nentrypoints:\n  - command: scripts/lint.sh\n---\n\nRun the linter and report every finding with its file and line.\n",
		"scripts/lint.sh": "#!/bin/sh\n",
	}, Binary: map[string][]byte{"assets/logo.png": {0x89, 'P', 'N', 'G', 0}}})
	if err != nil || !resp.Valid || !slices.Equal(resp.Skills, []string{"lint"}) || resp.Warnings != 0 {
		t.Fatalf("valid skill: %+v, %v", resp, err)
	}
	// A root of several, with errors named by the request's paths.
	resp, err = c.Validate(e.ctx, registry.ValidateRequest{Files: map[string]string{
		"good/SKILL.md": "---\nname: good\ndescription: Fine.\n---\n\nInstructions long enough to pass the length check of the validator.\n",
		"bad/SKILL.md":  "---\nname: bad\ndescription: Broken.\ndependencies: [nosuch]\n---\n\nInstructions long enough to pass the length check of the validator.\n",
		"worse.md":      "---\nname: Worse Name\n---\n",
	}})
	if err != nil || resp.Valid || resp.Errors < 2 || !slices.Equal(resp.Skills, []string{"good"}) {
		t.Fatalf("mixed: %+v, %v", resp, err)
	}
	for _, d := range resp.Diagnostics {
		if strings.Contains(d.File, "skillbus-validate") || strings.Contains(d.Message, "skillbus-validate") || strings.HasPrefix(d.File, "/") {
			t.Errorf("a temporary path leaks: %s", d)
		}
	}
	if !strings.Contains(resp.Diagnostics.String(), "bad/SKILL.md:4:") {
		t.Errorf("diagnostics do not name bad/SKILL.md with its line:\n%s", resp.Diagnostics)
	}
}

func TestServiceBadRequests(t *testing.T) {
	t.Parallel()
	e, _, c := served(t)
	tests := []struct {
		name string
		call func() error
		code string
		want string
	}{
		{"get without a name", func() error { _, err := c.Get(e.ctx, registry.GetRequest{}); return err }, "400", "name is required"},
		{"get a bad name", func() error { _, err := c.Get(e.ctx, registry.GetRequest{Name: "a.b"}); return err }, "400", "not a skill name"},
		{"get an unknown skill", func() error { _, err := c.Get(e.ctx, registry.GetRequest{Name: "nosuch"}); return err }, "404", "not in the catalog"},
		{"get an unknown version", func() error {
			_, err := c.Get(e.ctx, registry.GetRequest{Name: "deploy", Digest: "0123"})
			return err
		}, "404", "no kept version"},
		{"an empty search", func() error { _, err := c.Search(e.ctx, registry.SearchRequest{}); return err }, "400", "give a query"},
		{"a bad trigger pattern", func() error { _, err := c.Search(e.ctx, registry.SearchRequest{Trigger: "com.>.x"}); return err }, "400", "last token"},
		{"validate nothing", func() error { _, err := c.Validate(e.ctx, registry.ValidateRequest{}); return err }, "400", "no files"},
		{"validate outside paths", func() error {
			_, err := c.Validate(e.ctx, registry.ValidateRequest{Files: map[string]string{"../etc/passwd": "x"}})
			return err
		}, "400", "relative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var se *registry.ServiceError
			if !errors.As(err, &se) || se.Code != tt.code || !strings.Contains(se.Description, tt.want) {
				t.Errorf("got %v (%#v), want a %s mentioning %q", err, se, tt.code, tt.want)
			}
		})
	}
	// Bodies that are not the endpoint's JSON.
	for _, body := range []string{"{", `{"nme":"x"}`, `[1]`} {
		m, err := e.b.NC.RequestWithContext(e.ctx, events.Subjects{Prefix: "skillbus"}.Registry(registryapi.EndpointGet), []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get(micro.ErrorCodeHeader) != "400" {
			t.Errorf("body %s: %v %s", body, m.Header, m.Data)
		}
		var er registry.ErrorResponse
		if err := json.Unmarshal(m.Data, &er); err != nil || er.Code != "400" || er.Error == "" {
			t.Errorf("error body %s: %v", m.Data, err)
		}
	}
}

// The service is a NATS micro service: `nats micro ls` finds it with $SRV.INFO.
func TestServiceDiscoverable(t *testing.T) {
	t.Parallel()
	e, _, _ := served(t)
	m, err := e.b.NC.RequestWithContext(e.ctx, "$SRV.INFO."+registry.ServiceName, nil)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(m.Data, &info); err != nil {
		t.Fatal(err)
	}
	var eps []string
	for _, ep := range info.Endpoints {
		eps = append(eps, ep.Subject)
	}
	slices.Sort(eps)
	want := []string{"skillbus.registry.get", "skillbus.registry.list", "skillbus.registry.repair", "skillbus.registry.search", "skillbus.registry.validate"}
	if info.Name != registry.ServiceName || !slices.Equal(eps, want) {
		t.Errorf("info %+v", info)
	}
}

// Without a registry, the client says so.
func TestClientNoService(t *testing.T) {
	t.Parallel()
	e := setup(t)
	_, err := registry.NewClient(e.b.NC, "").List(e.ctx)
	if !errors.Is(err, registry.ErrNoService) {
		t.Fatalf("err = %v", err)
	}
}
