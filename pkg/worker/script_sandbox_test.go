//go:build linux

package worker_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/worker"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// scriptFiles serves script skills' files from memory, as the registry would.
type scriptFiles map[string]map[string]string // skill name -> path -> content

func (scriptFiles) Body(context.Context, *skill.Skill) (string, error) { return "", nil }
func (f scriptFiles) ReadFile(_ context.Context, s *skill.Skill, path string) ([]byte, error) {
	b, ok := f[s.Name][path]
	if !ok {
		return nil, os.ErrNotExist
	}
	return []byte(b), nil
}

// scriptSkill is a script skill whose default entrypoint runs scripts/run.sh.
func scriptSkill(name, script string) *skill.Skill {
	zero := 0
	return &skill.Skill{
		Name: name, Description: "d", Kind: skill.KindScript, Version: "1.0.0", MaxRetries: &zero,
		Digest:      strings.Repeat("ab", 32),
		Entrypoints: []skill.Entrypoint{{Name: skill.DefaultEntrypoint, Command: []string{"/bin/sh", "scripts/run.sh"}}},
		Resources:   []skill.Resource{{Path: "scripts/run.sh", Kind: skill.ResourceScript, Size: int64(len(script))}},
	}
}

// TestScriptSkillsAreIsolatedFromEachOther runs two script skills at once
// under a root worker, as exec steps are run in pkg/tool's
// TestExecStepsAreIsolatedFromEachOther: one keeps a secret in a file of its
// working directory (its fresh copy of the skill's files) and holds on; the
// other looks for it in every script run's directory under the temporary
// directory and in every process's environment. It may find neither: each run
// has a user of its own, whose directory is private to it.
func TestScriptSkillsAreIsolatedFromEachOther(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("only a root worker runs each script as a user of its own")
	}
	// The victim waits on a FIFO, so that it runs until the test lets it go.
	shared := t.TempDir()
	for _, d := range []string{filepath.Dir(shared), shared} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fifo := filepath.Join(shared, "go")
	if err := unix.Mkfifo(fifo, 0o666); err != nil || os.Chmod(fifo, 0o666) != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	tmp := os.TempDir()
	victim := `echo "sekrit-$SKILLBUS_EXECUTION_ID" > secret.txt; read x < '` + fifo + `'; echo released`
	peek := `for d in '` + tmp + `'/skillbus-script-*; do cat "$d/secret.txt" 2>&1; done
for e in /proc/[0-9]*/environ; do tr '\0' '\n' < "$e" 2>/dev/null | grep '^SKILLBUS_EXECUTION_ID='; done
true`
	files := scriptFiles{"victim": {"scripts/run.sh": victim}, "peek": {"scripts/run.sh": peek}}
	f := setup(t, scriptSkill("victim", victim), scriptSkill("peek", peek))

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := workflow.New(workflow.Config{Tools: f.tools, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(worker.Config{
		Bus: f.b, Catalog: f.cat, Engine: eng, Log: log, AckWait: time.Second, Files: files,
		Exec:    tool.ExecConfig{Log: log},
		Backoff: worker.Backoff{Base: 5 * time.Millisecond, Max: 20 * time.Millisecond}, Name: "scripts", Events: f.level,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
	released := false
	release := func() {
		if released {
			return
		}
		released = true
		// Not blocking: if the victim is not waiting, there is no one to release.
		p, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			t.Logf("releasing the victim: %v", err)
			return
		}
		_, _ = p.WriteString("go\n")
		p.Close()
	}
	defer release()

	victimID := f.job("v1", "victim")
	var dir string
	natstest.Eventually(t, 30*time.Second, func() bool {
		found, _ := filepath.Glob(filepath.Join(tmp, "skillbus-script-*", "secret.txt"))
		for _, p := range found {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), victimID) {
				dir = filepath.Dir(p)
				return true
			}
		}
		return false
	}, "the victim's secret file")
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid < tool.DefaultUIDs.First || st.Uid == tool.NobodyID || st.Mode&0o777 != 0o700 {
		t.Errorf("the victim's directory is user %d's, mode %o; want a user of its own from %d, mode 700", st.Uid, st.Mode&0o777, tool.DefaultUIDs.First)
	}

	peekID := f.job("p1", "peek")
	done := f.waitEvent(peekID, events.TypeExecutionCompleted)
	out := fmt.Sprint(done["outputs"])
	if !strings.Contains(out, dir+"/secret.txt: Permission denied") {
		t.Errorf("the other script did not meet the victim's directory as a stranger: %s", out)
	}
	if strings.Contains(out, "sekrit") || strings.Contains(out, victimID) {
		t.Errorf("the other script read the victim's secret or environment: %s", out)
	}
	release()
	f.waitEvent(victimID, events.TypeExecutionCompleted)
}
