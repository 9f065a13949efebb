package catalog

import (
	"errors"
	"strings"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/skill"
)

// The catalog's layout in NATS, written by the registry and read here.
//
// KV bucket "skills":
//
//	<name>              the current version of a skill: the JSON of skill.Skill without
//	                    its body (metadata, compiled workflow, resource list, digest)
//	<name>.v.<digest>   every version still kept, same value; a run pinned to a version
//	                    reads it here after the skill has changed
//
// Skill names hold no dots, so current keys are exactly the one-token keys (watched
// with the filter "*") and version keys are "*.v.*".
//
// Object store "skill-files":
//
//	<name>/<digest>/<path>   every file of the version, as on disk (SKILL.md, skill.yaml,
//	                         scripts/..., references/..., assets/...; binary too)
//	<name>/<digest>/.body    the SKILL.md body, the instructions
//
// A version's objects are written before its keys, so whoever reads a key can fetch
// its files. Skill files never start with '.', so .body cannot collide with one.
const (
	// CurrentKeys is the KV filter matching the current version of every skill.
	CurrentKeys = "*"
	// VersionKeys is the KV filter matching every kept version.
	VersionKeys = "*.v.*"
	// BodyFile is the object, beside a version's files, holding the SKILL.md body.
	BodyFile = ".body"
)

// Errors of lookups.
var (
	// ErrNotFound: the skill is not in the catalog.
	ErrNotFound = errors.New("skill not in the catalog")
	// ErrVersionNotFound: the catalog does not keep that version of the skill (any
	// more): the registry collected it after its retention (see docs/registry.md).
	ErrVersionNotFound = errors.New("skill version not kept")
	// ErrFileNotFound: the skill has no such file.
	ErrFileNotFound = errors.New("no such file in the skill")
)

// VersionKey is the KV key of one version of a skill.
func VersionKey(name, digest string) string { return name + ".v." + digest }

// ParseVersionKey splits a version key; ok is false for any other key.
func ParseVersionKey(key string) (name, digest string, ok bool) {
	name, digest, ok = strings.Cut(key, ".v.")
	if !ok || name == "" || digest == "" || strings.Contains(digest, ".") {
		return "", "", false
	}
	return name, digest, true
}

// ObjectName is the object store name of one file of a version of a skill; path is
// slash-separated and relative to the skill directory (a Resource.Path, "SKILL.md",
// or BodyFile).
func ObjectName(name, digest, path string) string { return name + "/" + digest + "/" + path }

// FilesBucket is the name of the object store of skill files: "skill-files" with the
// default prefix, else "<prefix>_skill-files", like the KV buckets (see bus).
func FilesBucket(b *bus.Bus) string {
	if p := b.Config().Prefix; p != "skillbus" {
		return p + "_skill-files"
	}
	return "skill-files"
}

// Strip returns a copy of s as the catalog holds it: without the body, which stays
// in the object store until someone needs it (progressive disclosure).
func Strip(s *skill.Skill) *skill.Skill {
	c := *s
	c.Body = ""
	return &c
}
