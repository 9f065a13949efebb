package skill

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParsed(t, func() (*Skill, Diagnostics) {
			return LoadOptions{KnownTools: seedTools}.ParseWorkflow("fuzz/skill.yaml", data)
		})
	})
}
