package skill

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// addFixtures seeds a fuzz corpus with every fixture file whose name ends with one
// of the suffixes.
func addFixtures(f *testing.F, suffixes ...string) {
	err := filepath.WalkDir(fixtures, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		for _, s := range suffixes {
			if strings.HasSuffix(p, s) {
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				f.Add(data)
			}
		}
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
}

// checkParsed holds for any input: parsing ends quickly, every diagnostic names the
// file, a skill comes back exactly when there are no errors, and it is JSON.
func checkParsed(t *testing.T, parse func() (*Skill, Diagnostics)) {
	start := time.Now()
	s, ds := parse()
	// Unloaded, the slowest seed parses in 0.3s; a blow-up (alias bombs, backtracking)
	// takes minutes. The bound leaves room for -race on a loaded 2-core machine.
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("parsing took %s", d)
	}
	for _, d := range ds {
		if d.File == "" || d.Message == "" || d.Line < 0 || d.Col < 0 {
			t.Fatalf("bad diagnostic: %#v", d)
		}
	}
	if (s == nil) != ds.HasErrors() {
		t.Fatalf("skill %v with errors %v:\n%s", s != nil, ds.HasErrors(), ds)
	}
	if s != nil {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("skill is not JSON: %v", err)
		}
		var back Skill
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("skill JSON does not read back: %v", err)
		}
	}
}

func FuzzParseSkillMD(f *testing.F) {
	addFixtures(f, ".md")
	f.Add([]byte("---\nname: a\ndescription: b\n---\n```\n"))
	f.Add([]byte("\xef\xbb\xbf---\r\nname: a\r\n---\r\n"))
	f.Add([]byte("---\n&a [*a]\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParsed(t, func() (*Skill, Diagnostics) {
			return LoadOptions{KnownTools: seedTools}.ParseSkillMD("fuzz/SKILL.md", data)
		})
	})
}

func FuzzParseWorkflow(f *testing.F) {
	addFixtures(f, ".yaml", ".yml")
	f.Add([]byte("name: a\ndescription: b\nsteps:\n- id: x\n  tool: t\n  args: {a: \"{{ x.y }}\"}\n"))
	f.Add([]byte("steps: [{id: a, compute: 'result = ('}]\n"))
	f.Add([]byte("name: a\ndescription: b\nqueue_priority: 'data.vip ? 300 : -60'\nsteps: [{id: x, tool: t}]\n"))
	f.Add([]byte("name: a\ndescription: b\nthrottle: {key: data.a, limit: 10, period: 1s, burst: 2}\nconcurrency: [{key: data.a, limit: 2}, {limit: 9}]\n" +
		"rate_limit: {limit: 0, period: 90m}\nbatch: {max_size: 5, timeout: 5s, size: 1}\nsteps: [{id: x, tool: t}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParsed(t, func() (*Skill, Diagnostics) {
			return LoadOptions{KnownTools: seedTools}.ParseWorkflow("fuzz/skill.yaml", data)
		})
	})
}

// FuzzColonDescription: a one-line plain description holding ': ' loads as the text
// written, with a warning naming its line; a description strict YAML reads is read
// the same as before, without that warning; nothing else changes.
func FuzzColonDescription(f *testing.F) {
	for _, v := range []string{"Review code: bugs, style", "a: b: c", "ends with:", "plain", "\"quoted: fine\"", "x # y: z", "|", "[a: b]", "a:b", "Üñí: cødé"} {
		f.Add(v, "tags: [a]")
	}
	f.Fuzz(func(t *testing.T, v, after string) {
		if strings.ContainsAny(v, "\n\r") || strings.ContainsAny(after, "\r") {
			return
		}
		doc := "---\nname: fz\ndescription: " + v + "\n" + after + "\n---\nReview the diff for bugs, risky changes and unclear names; say what to fix and why.\n"
		checkParsed(t, func() (*Skill, Diagnostics) { return ParseSkillMD("fz.md", []byte(doc)) })
		s, ds := ParseSkillMD("fz.md", []byte(doc))
		var strict yaml.Node
		strictOK := yaml.Unmarshal([]byte("name: fz\ndescription: "+v+"\n"+after+"\n"), &strict) == nil
		warned := false
		for _, d := range ds {
			if strings.Contains(d.Message, "holds ': '") {
				warned = true
				if d.Line != 3 || d.Field != "description" || !strings.Contains(d.Hint, "quote it") {
					t.Fatalf("warning %#v", d)
				}
			}
		}
		if strictOK && warned {
			t.Fatalf("warned about %q, which strict YAML reads:\n%s", v, ds)
		}
		if warned && s != nil {
			want := strings.Trim(v, " \t") // YAML white space is space and tab
			if k := strings.Index(want, " #"); k >= 0 {
				want = strings.TrimRight(want[:k], " \t")
			}
			if s.Description != want {
				t.Fatalf("description %q, want %q", s.Description, want)
			}
		}
	})
}
