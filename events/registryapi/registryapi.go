// Package registryapi is the wire contract of the skillbus-registry service: its
// endpoints and the JSON bodies of its requests and responses. A caller of the
// service (the router, the console, the CLI) needs only this package, not the
// registry itself. docs/registry.md is the reference of the formats.
package registryapi

import (
	"time"

	"github.com/skillbus/skillbus/pkg/skill"
)

// The skillbus-registry service: requests and responses are JSON; docs/registry.md
// is their reference. Errors come back as NATS micro errors: the headers
// Nats-Service-Error-Code (400 bad request, 404 not found, 500 the registry failed)
// and Nats-Service-Error (the message), with an ErrorResponse as the body.
const (
	// ServiceName is the NATS micro service name, as `nats micro ls` shows it.
	ServiceName = "skillbus-registry"
	// ServiceVersion is the version of the request and response formats.
	ServiceVersion = "1.0.0"
)

// The service's endpoints, on the subjects <prefix>.registry.<endpoint>
// (events.Subjects.Registry).
const (
	EndpointList     = "list"
	EndpointGet      = "get"
	EndpointSearch   = "search"
	EndpointValidate = "validate"
	EndpointRepair   = "repair"
)

// States of a skill in the catalog.
const (
	// StateOK: the skill's files are valid and this version is what they hold.
	StateOK = "ok"
	// StateInvalid: the skill's files are invalid now; the last good version keeps
	// serving until they are fixed. Diagnostics say what is wrong.
	StateInvalid = "invalid"
)

// SkillInfo is one skill of the catalog as the registry sees it: what it serves and
// the state of its files.
type SkillInfo struct {
	Name           string            `json:"name"`
	Description    string            `json:"description"`
	Version        string            `json:"version,omitempty"`
	Kind           skill.Kind        `json:"kind"`
	Pool           string            `json:"pool"`
	Digest         string            `json:"digest"`
	Triggers       []string          `json:"triggers,omitempty"`
	TriggerPhrases []string          `json:"trigger_phrases,omitempty"` // triggers that are words or phrases, matched in the request text only
	Schedule       string            `json:"schedule,omitempty"`        // a scheduled skill's cron expression, and its zone in parentheses
	Tags           []string          `json:"tags,omitempty"`
	Source         string            `json:"source,omitempty"` // the main file, on the registry's host
	State          string            `json:"state"`            // StateOK or StateInvalid
	Errors         int               `json:"errors"`
	Warnings       int               `json:"warnings"`
	Diagnostics    skill.Diagnostics `json:"diagnostics,omitempty"` // of the skill's files, now
}

// ListRequest asks for the catalog. It has no fields; an empty body will do.
type ListRequest struct{}

// ListResponse is the catalog: every skill serving, by name, and the problems of
// files that are no skill of the catalog (a new skill that never validated, a file
// that is no skill at all).
type ListResponse struct {
	Skills   []SkillInfo       `json:"skills"`
	Problems skill.Diagnostics `json:"problems,omitempty"`
	SyncedAt time.Time         `json:"synced_at"`
}

// GetRequest asks for one skill.
type GetRequest struct {
	Name string `json:"name"` // required; either separator matches
	// Digest selects a kept version; empty: the version serving.
	Digest string `json:"digest,omitempty"`
	// Body includes the SKILL.md body (skill.body) in the response.
	Body bool `json:"body,omitempty"`
}

// GetResponse is one skill: the compiled skill (without its body unless asked), its
// state and diagnostics, and the versions kept.
type GetResponse struct {
	Skill    *skill.Skill  `json:"skill"`
	Info     SkillInfo     `json:"info"`
	Versions []VersionInfo `json:"versions"`
}

// VersionInfo is one kept version of a skill, newest first.
type VersionInfo struct {
	Digest    string    `json:"digest"`
	Version   string    `json:"version,omitempty"`
	Published time.Time `json:"published"`
	Current   bool      `json:"current,omitempty"`
}

// SearchRequest searches the catalog. At least one of Query and Trigger is required.
type SearchRequest struct {
	// Query is free text matched against names, descriptions, tags, triggers,
	// capabilities and positive examples.
	Query string `json:"query,omitempty"`
	// Trigger keeps the skills listening for this CloudEvent type; NATS wildcards
	// work on its dot-separated tokens (com.github.*, com.github.>).
	Trigger string `json:"trigger,omitempty"`
	// Limit bounds the results; default 20, at most 1000.
	Limit int `json:"limit,omitempty"`
}

// SearchResponse lists the matches, best first.
type SearchResponse struct {
	Results []SearchResult `json:"results"`
}

// SearchResult is one match: the skill, its score (higher is better; 0 when only a
// trigger was asked for) and the fields that matched.
type SearchResult struct {
	SkillInfo
	Score   float64  `json:"score"`
	Matched []string `json:"matched,omitempty"`
}

// ValidateRequest validates skill files that need not be on the registry's host: a
// CI sends a repository's skills. Paths are slash-separated and relative; the files
// are checked as a catalog of their own (dependencies must be among them).
//
// Files holding SKILL.md or skill.yaml at the top level are one skill directory,
// named Dir (default: the skill's name); otherwise the files are a skills root
// (<name>/SKILL.md, <category>/<name>.md, ...).
type ValidateRequest struct {
	Files  map[string]string `json:"files,omitempty"`  // path → text
	Binary map[string][]byte `json:"binary,omitempty"` // path → content (base64 in JSON), for binary resources
	Dir    string            `json:"dir,omitempty"`
	// KnownTools, when set, makes unknown tool names errors (skill.LoadOptions).
	KnownTools []string `json:"known_tools,omitempty"`
}

// ValidateResponse is the verdict: Valid when there is no error. Diagnostics name
// files by the paths of the request.
type ValidateResponse struct {
	Valid       bool              `json:"valid"`
	Skills      []string          `json:"skills"` // the valid skills found
	Errors      int               `json:"errors"`
	Warnings    int               `json:"warnings"`
	Diagnostics skill.Diagnostics `json:"diagnostics"`
}

// ErrorResponse is the body of an error reply.
type ErrorResponse struct {
	Code  string `json:"code"`
	Error string `json:"error"`
}

// RepairRequest publishes an approved repair: Files are the patched text files of
// the skill at version Base; the registry writes them back to the skill's directory
// and publishes the version they make, whose repaired_by is RepairID.
type RepairRequest struct {
	Name     string            `json:"name"`
	Base     string            `json:"base"`
	Files    map[string]string `json:"files"`
	RepairID string            `json:"repair_id"`
}

// RepairResponse names the version the repair made.
type RepairResponse struct {
	Digest  string `json:"digest"`
	Version string `json:"version,omitempty"`
}
