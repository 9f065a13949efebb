package skill

import (
	"fmt"
	"path/filepath"
)

// Subagent is a specialised agent a skill can delegate to: a markdown
// file under subagents/ whose front matter names its capabilities and how many may
// run at once, and whose body is its system prompt.
type Subagent struct {
	Name            string         `json:"name"`
	Description     string         `json:"description"`
	Type            string         `json:"type,omitempty"`
	Version         string         `json:"version,omitempty"`
	Author          string         `json:"author,omitempty"`
	License         string         `json:"license,omitempty"`
	Compatibility   string         `json:"compatibility,omitempty"`
	Metadata        map[string]any `json:"metadata,omitempty"`
	Triggers        []string       `json:"triggers,omitempty"`
	Tags            []string       `json:"tags,omitempty"`
	Capabilities    []string       `json:"capabilities"`
	AllowedTools    []string       `json:"allowed_tools,omitempty"`
	RequiredTools   []string       `json:"required_tools,omitempty"`
	DisallowedTools []string       `json:"disallowed_tools,omitempty"`
	Priority        string         `json:"priority,omitempty"`
	MaxRetries      *int           `json:"max_retries,omitempty"`
	Timeout         Duration       `json:"timeout,omitempty"`
	MaxConcurrent   int            `json:"max_concurrent,omitempty"` // 0: no limit
	Body            string         `json:"body,omitempty"`
	Source          string         `json:"source,omitempty"`
	Digest          string         `json:"digest,omitempty"`
}

// ParseSubagent parses a subagent file with the zero LoadOptions.
func ParseSubagent(file string, data []byte) (*Subagent, Diagnostics) {
	return LoadOptions{}.ParseSubagent(file, data)
}

// ParseSubagent parses a subagent file: front matter with the metadata fields a
// skill has (less routing and execution fields), at least one capability, and a
// body.
func (o LoadOptions) ParseSubagent(file string, data []byte) (*Subagent, Diagnostics) {
	var ds Diagnostics
	a, _ := o.withDefaults().parseSubagent(&fileData{path: file, rel: filepath.Base(file), data: data}, &ds)
	ds.Sort()
	if ds.HasErrors() {
		return nil, ds
	}
	return a, ds
}

func (o *LoadOptions) loadSubagent(p string, ds *Diagnostics) (*Subagent, map[string]at) {
	f, ok := o.readText(report{file: p, ds: ds}, p)
	if !ok {
		return nil, nil
	}
	return o.parseSubagent(f, ds)
}

func (o *LoadOptions) parseSubagent(f *fileData, ds *Diagnostics) (*Subagent, map[string]at) {
	b := o.parse(ds, f, nil, "", subagentFields)
	if b == nil {
		return nil, nil
	}
	s := b.s
	if len(s.Capabilities) == 0 {
		p, ok := b.pos["capabilities"]
		if !ok {
			p = at{file: f.path, line: 1, col: 1}
		}
		*ds = append(*ds, p.diag(SeverityError, "capabilities", "list what the subagent can do: capabilities: [web_search]",
			"a subagent needs capabilities"))
	}
	return &Subagent{
		Name: s.Name, Description: s.Description, Type: s.Type, Version: s.Version, Author: s.Author,
		License: s.License, Compatibility: s.Compatibility, Metadata: s.Metadata,
		Triggers: s.Triggers, Tags: s.Tags, Capabilities: s.Capabilities,
		AllowedTools: s.AllowedTools, RequiredTools: s.RequiredTools, DisallowedTools: s.DisallowedTools,
		Priority: s.Priority, MaxRetries: s.MaxRetries, Timeout: s.Timeout, MaxConcurrent: s.MaxConcurrent,
		Body: s.Body, Source: f.path, Digest: digest([]fileData{*f}),
	}, b.pos
}

// resolveSubagents keeps the first subagent of each name.
func resolveSubagents(results []result, ds *Diagnostics) []*Subagent {
	var out []*Subagent
	first := map[string]*Subagent{}
	for _, r := range results {
		a := r.agent
		if a == nil {
			continue
		}
		key := NormalizeName(a.Name)
		if prev, dup := first[key]; dup {
			sev, msg := SeverityWarning, "subagent %s is shadowed by %s, found first (the first root wins)"
			if prev.Name != a.Name {
				sev, msg = SeverityError, "subagent %s conflicts with %s: names equal but for '-' and '_' are the same"
			}
			p := r.pos["name"]
			*ds = append(*ds, Diagnostic{File: a.Source, Line: p.line, Col: p.col, Severity: sev, Field: "name",
				Message: fmt.Sprintf(msg, a.Name, prev.Source)})
			continue
		}
		first[key] = a
		out = append(out, a)
	}
	return out
}
