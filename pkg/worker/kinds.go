package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/instruct"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/tool/llm"
)

// Files reads a skill's instructions and files on demand (progressive disclosure:
// the catalog holds metadata; bodies, scripts and references stay in the registry's
// object store until a run needs them). *catalog.Files implements it.
type Files interface {
	Body(ctx context.Context, s *skill.Skill) (string, error)
	ReadFile(ctx context.Context, s *skill.Skill, path string) ([]byte, error)
}

// Tools gives a job the worker's tools, making sure the ones it names are looked
// for (tools served on the bus may have appeared since the last look).
// *bustool.Watcher implements it.
type Tools interface {
	Ensure(ctx context.Context, names ...string) *tool.Set
}

// toolNames lists every tool a skill names.
func toolNames(s *skill.Skill) []string {
	names := append(append([]string(nil), s.RequiredTools...), s.AllowedTools...)
	if s.Workflow != nil {
		for _, st := range s.Workflow.Steps {
			if st.Tool != "" {
				names = append(names, st.Tool)
			}
		}
	}
	for _, p := range s.Prerequisites {
		if p.Kind == skill.PrerequisiteTool {
			names = append(names, p.Name)
		}
	}
	return names
}

// runInstruction runs an instruction skill: its body as the system prompt of the
// configured chat model, its allowed tools offered as functions, its references
// read on request.
func (w *Worker) runInstruction(ctx context.Context, j *job, inputs map[string]any, tools *tool.Set) (map[string]any, error) {
	var body string
	var read func(context.Context, string) ([]byte, error)
	if w.cfg.Files != nil {
		var err error
		if body, err = w.cfg.Files.Body(ctx, j.skill); err != nil {
			return nil, failure.Wrap(failure.Retryable, fmt.Errorf("read the skill's instructions: %w", err))
		}
		read = func(ctx context.Context, p string) ([]byte, error) { return w.cfg.Files.ReadFile(ctx, j.skill, p) }
	}
	res, err := w.cfg.Instruct.Execute(ctx, instruct.Run{
		ExecutionID: j.data.ExecutionID, Skill: j.skill, Instructions: body, Inputs: inputs,
		Tools: tools, ReadReference: read, Observer: &turnObserver{w: w, j: j},
	})
	if err != nil {
		return nil, err
	}
	return res.Outputs(), nil
}

// turnObserver publishes an instruction run's model turns and tool calls as steps.
type turnObserver struct {
	w *Worker
	j *job
}

func (o *turnObserver) id(step, what string) string {
	return o.j.data.ExecutionID + "." + o.j.deliveryID() + ".step." + step + "." + what
}

func (o *turnObserver) started(step, kind, toolName string) {
	o.w.emitID(o.j, o.id(step, "started"), events.TypeStepStarted, events.StepStarted{ExecutionID: o.j.data.ExecutionID, StepID: step, StepType: kind, Tool: toolName})
}

func (o *turnObserver) completed(step string, result any, err error, d time.Duration) {
	if err != nil && failure.ClassOf(err) == failure.Fatal {
		o.w.emitID(o.j, o.id(step, "failed"), events.TypeStepFailed, events.StepFailed{ExecutionID: o.j.data.ExecutionID, StepID: step, Error: err.Error(), Class: string(failure.ClassOf(err)), DurationMS: ms(d)})
		return
	}
	ev := events.StepCompleted{ExecutionID: o.j.data.ExecutionID, StepID: step, Success: err == nil, Status: "completed", Result: result, DurationMS: ms(d), Attempt: o.j.attempt}
	if err != nil {
		ev.Status, ev.Result, ev.Error, ev.Class = "continued", nil, err.Error(), string(failure.ClassOf(err))
	}
	o.w.emitID(o.j, o.id(step, "completed"), events.TypeStepCompleted, ev)
}

func (o *turnObserver) TurnStarted(turn int) { o.started(instruct.TurnStep(turn), "model", "") }
func (o *turnObserver) TurnCompleted(turn int, reply llm.Message, _ llm.Usage, err error, d time.Duration) {
	if err != nil {
		o.w.emitID(o.j, o.id(instruct.TurnStep(turn), "failed"), events.TypeStepFailed, events.StepFailed{ExecutionID: o.j.data.ExecutionID, StepID: instruct.TurnStep(turn), Error: err.Error(), Class: string(failure.ClassOf(err)), DurationMS: ms(d)})
		return
	}
	o.completed(instruct.TurnStep(turn), reply.Content, nil, d)
}
func (o *turnObserver) ToolStarted(c instruct.ToolCall) { o.started(c.Step(), "tool", c.Tool) }
func (o *turnObserver) ToolCompleted(c instruct.ToolCall, result any, err error, d time.Duration) {
	o.completed(c.Step(), result, err, d)
}

// runScript runs a script skill's entrypoint with the exec tool, in a
// fresh copy of the skill's files: the entrypoint named by the input "action", else
// "default". The inputs arrive as JSON on standard input; the process gets only the
// exec tool's explicit environment plus SKILLBUS_EXECUTION_ID.
func (w *Worker) runScript(ctx context.Context, j *job, inputs map[string]any, obs *observer) (map[string]any, error) {
	s := j.skill
	name := skill.DefaultEntrypoint
	if a, ok := inputs["action"].(string); ok && a != "" {
		name = a
	}
	var ep *skill.Entrypoint
	for i := range s.Entrypoints {
		if s.Entrypoints[i].Name == name {
			ep = &s.Entrypoints[i]
		}
	}
	if ep == nil {
		return nil, failure.Fatalf("skill %s has no entrypoint %q", s.Name, name)
	}
	if w.cfg.Files == nil {
		return nil, failure.Fatalf("skill %s is a script skill and this worker cannot read skill files", s.Name)
	}
	dir, err := os.MkdirTemp("", "skillbus-script-")
	if err != nil {
		return nil, failure.Wrap(failure.Retryable, err)
	}
	defer os.RemoveAll(dir)
	for _, r := range s.Resources {
		b, err := w.cfg.Files.ReadFile(ctx, s, r.Path)
		if err != nil {
			return nil, failure.Wrap(failure.Retryable, fmt.Errorf("copy %s: %w", r.Path, err))
		}
		p := filepath.Join(dir, filepath.FromSlash(r.Path))
		if !filepath.IsLocal(filepath.FromSlash(r.Path)) {
			return nil, failure.Fatalf("resource %s leaves the skill directory", r.Path)
		}
		mode := os.FileMode(0o644)
		if r.Kind == skill.ResourceScript {
			mode = 0o755
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, failure.Wrap(failure.Retryable, err)
		}
		if err := os.WriteFile(p, b, mode); err != nil {
			return nil, failure.Wrap(failure.Retryable, err)
		}
	}
	if err := missingPath(dir, ep.Command, s.Resources); err != nil {
		return nil, err
	}
	stdin, err := json.Marshal(inputs)
	if err != nil {
		return nil, failure.Fatalf("inputs: %v", err)
	}
	cfg := w.cfg.Exec
	// The run's own directory, not the operator's shared --exec-dir: under a
	// root worker the process runs as a user of its own, to whom it is given.
	cfg.WorkDir, cfg.CallDir = "", dir
	if cfg.Timeout == 0 {
		cfg.Timeout = s.ExecTimeout()
	}
	command := make([]any, len(ep.Command))
	for i, c := range ep.Command {
		command[i] = c
	}
	step := &skill.Step{ID: "entrypoint-" + ep.Name, Tool: "exec"}
	obs.StepStarted(step, "script")
	start := time.Now()
	out, err := tool.NewExec(cfg).Call(ctx, tool.Call{
		Args:        map[string]any{"command": command, "stdin": string(stdin), "env": map[string]any{"SKILLBUS_EXECUTION_ID": j.data.ExecutionID}},
		ExecutionID: j.data.ExecutionID, Step: step.ID, IdempotencyKey: j.data.ExecutionID + "/" + step.ID,
	})
	if err != nil {
		obs.StepFailed(step, err, time.Since(start))
		return nil, err
	}
	w.emitID(j, obs.id(step, "completed"), events.TypeStepCompleted, events.StepCompleted{
		ExecutionID: j.data.ExecutionID, StepID: step.ID, Success: true, Status: "completed", Result: out,
		DurationMS: ms(time.Since(start)), Calls: 1, Attempt: j.attempt, Started: start, Finished: time.Now(),
	})
	res, _ := out.(map[string]any)
	if v, ok := res["json"]; ok {
		return map[string]any{"result": v, "exit_code": res["exit_code"]}, nil
	}
	return map[string]any{"result": res["stdout"], "exit_code": res["exit_code"]}, nil
}

// missingPath reports an entrypoint argument that names a file in one of the skill's
// directories (scripts/, references/, ...) that the skill does not have: a path fault
// a repair can fix, rather than a process failing on a missing file.
func missingPath(dir string, command []string, resources []skill.Resource) error {
	for _, arg := range command[min(1, len(command)):] {
		rel := strings.TrimPrefix(arg, "./")
		first, _, nested := strings.Cut(rel, "/")
		if !nested || !filepath.IsLocal(filepath.FromSlash(rel)) {
			continue
		}
		if st, err := os.Stat(filepath.Join(dir, first)); err != nil || !st.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(rel))); err == nil {
			continue
		}
		have := make([]string, 0, len(resources))
		for _, r := range resources {
			have = append(have, r.Path)
		}
		return (&failure.Fault{Kind: failure.FaultPath, Name: arg, Have: have, Step: "entrypoint",
			Err: fmt.Errorf("entrypoint argument %s is no file of the skill", arg)}).Repairable()
	}
	return nil
}
