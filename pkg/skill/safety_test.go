package skill

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const okMD = "---\nname: s\ndescription: a skill for safety tests\n---\nInstructions long enough not to be reported as too short by the checks.\n"

// skillDir writes files (relative path → content) into a new skill directory "s".
func skillDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "s")
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skip("symlinks unsupported:", err)
	}
}

func TestSafety(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string
		setup func(t *testing.T, dir string)
		opts  LoadOptions
		want  []diag
	}{
		{
			name:  "symlink outside",
			files: map[string]string{"SKILL.md": okMD},
			setup: func(t *testing.T, dir string) {
				secret := filepath.Join(filepath.Dir(dir), "secret.txt")
				os.WriteFile(secret, []byte("key"), 0o600)
				symlink(t, secret, filepath.Join(dir, "references", "leak.txt"))
			},
			want: []diag{{"s/references/leak.txt", SeverityError, "symlink points outside the skill directory"}},
		},
		{
			name:  "relative symlink escaping",
			files: map[string]string{"SKILL.md": okMD, "scripts/.keep": ""},
			setup: func(t *testing.T, dir string) {
				symlink(t, "../../../../../../../../etc", filepath.Join(dir, "scripts", "etc"))
			},
			want: []diag{{"s/scripts/etc", SeverityError, "symlink points outside the skill directory"}},
		},
		{
			name:  "symlink inside is fine",
			files: map[string]string{"SKILL.md": okMD, "references/a.md": "a"},
			setup: func(t *testing.T, dir string) {
				symlink(t, "a.md", filepath.Join(dir, "references", "b.md"))
				symlink(t, ".", filepath.Join(dir, "references", "self")) // a loop, visited once
			},
		},
		{
			name:  "broken symlink",
			files: map[string]string{"SKILL.md": okMD},
			setup: func(t *testing.T, dir string) {
				symlink(t, "nowhere", filepath.Join(dir, "dangling"))
			},
			want: []diag{{"s/dangling", SeverityError, "broken symlink"}},
		},
		{
			name:  "fifo",
			files: map[string]string{"SKILL.md": okMD},
			setup: func(t *testing.T, dir string) {
				if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
					t.Skip("mkfifo:", err)
				}
			},
			want: []diag{{"s/pipe", SeverityError, "not a regular file"}},
		},
		{
			name:  "SKILL.md too large",
			files: map[string]string{"SKILL.md": okMD + strings.Repeat("x", 2000)},
			opts:  LoadOptions{MaxFileSize: 1024},
			want:  []diag{{"s/SKILL.md", SeverityError, "SKILL.md is 2.1 KiB; the limit for a text file is 1 KiB"}},
		},
		{
			name:  "text resource too large",
			files: map[string]string{"SKILL.md": okMD, "references/big.md": strings.Repeat("x", 2048), "assets/big.bin": "\x00" + strings.Repeat("x", 4096)},
			opts:  LoadOptions{MaxFileSize: 1024},
			want:  []diag{{"s/references/big.md", SeverityWarning, "references/big.md is 2 KiB, more than the 1 KiB text file limit"}},
		},
		{
			name:  "skill too large",
			files: map[string]string{"SKILL.md": okMD, "assets/a.bin": strings.Repeat("\x00", 600), "assets/b.bin": strings.Repeat("\x00", 600)},
			opts:  LoadOptions{MaxSkillSize: 1024},
			want:  []diag{{"s", SeverityError, "the skill's files total more than 1 KiB, the limit"}},
		},
		{
			name:  "too many files",
			files: map[string]string{"SKILL.md": okMD, "a": "", "b": "", "c": ""},
			opts:  LoadOptions{MaxFiles: 3},
			want:  []diag{{"s", SeverityError, "the skill has more than 3 files"}},
		},
		{
			name:  "no limits",
			files: map[string]string{"SKILL.md": okMD + strings.Repeat("x", 200<<10)},
			opts:  LoadOptions{MaxFileSize: -1, MaxSkillSize: -1, MaxFiles: -1},
			want:  []diag{{"s/SKILL.md:5", SeverityWarning, "more than 50000 crowds a model's context"}},
		},
		{
			name:  "binary SKILL.md",
			files: map[string]string{"SKILL.md": "---\nname: s\x00\n---\n"},
			want:  []diag{{"s/SKILL.md", SeverityError, "SKILL.md is not UTF-8 text"}},
		},
		{
			name:  "hidden entries skipped",
			files: map[string]string{"SKILL.md": okMD, ".git/HEAD": "ref", ".env": "SECRET=1"},
		},
		{
			name:  "long body",
			files: map[string]string{"SKILL.md": okMD + strings.Repeat("word ", 10_001)},
			want:  []diag{{"s/SKILL.md:5", SeverityWarning, "instructions are 50076 characters long; more than 50000"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := skillDir(t, tt.files)
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			s, ds := tt.opts.LoadPath(dir)
			checkFiles(t, ds)
			if diff := cmp.Diff(tt.want, project(ds, filepath.Dir(dir), tt.want), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("diagnostics (-want +got):\n%s\nall:\n%s", diff, ds)
			}
			if (s == nil) != ds.HasErrors() {
				t.Errorf("skill %v, errors %v", s != nil, ds.HasErrors())
			}
			if s != nil {
				for _, r := range s.Resources {
					if strings.HasPrefix(r.Path, ".") || strings.Contains(r.Path, "/.") {
						t.Errorf("hidden file listed: %s", r.Path)
					}
				}
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	t.Parallel()
	big := []byte(okMD + strings.Repeat("x", DefaultMaxFileSize))
	if s, ds := ParseSkillMD("big.md", big); s != nil || !strings.Contains(ds.String(), "limit for a text file is 100 KiB") {
		t.Errorf("default limit not applied: %s", ds)
	}
	if s, ds := (LoadOptions{MaxFileSize: -1}).ParseSkillMD("big.md", big); s == nil {
		t.Errorf("unlimited: %s", ds)
	}
}
