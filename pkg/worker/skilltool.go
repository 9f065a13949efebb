package worker

import (
	"context"
	"encoding/json"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/client"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/tool"
)

// DefaultMaxDepth bounds delegation through the skill tool: a skill may call a skill
// that calls a skill, no deeper, so delegation cannot loop.
const DefaultMaxDepth = 2

type parentKey struct{}

// parent is what the skill tool needs of the job it runs in: its activation, which
// the child trigger names (events.ExtParent), and its delegation depth, which the
// router wrote in the job.
type parent struct {
	activation string
	depth      int
}

// runContext is a job's run context: its Stop (control.go) and its parent for the
// skill tool, in the job, so that a run's context costs no allocation of its own.
type runContext struct {
	tool.StopContext
	parent parent
}

// Value returns the parent for parentOf and asks the StopContext for anything else.
func (c *runContext) Value(key any) any {
	if _, ok := key.(parentKey); ok {
		return c.parent
	}
	return c.StopContext.Value(key)
}

func parentOf(ctx context.Context) parent {
	p, _ := ctx.Value(parentKey{}).(parent)
	return p
}

// SkillTool is the `skill` tool: it invokes another skill over the bus — a trigger on
// skillbus.trigger.skill.<name>, routed and run like any other — and waits for its
// result. Args: name (required), inputs (an object; default {}). The child trigger's
// id is the step's idempotency key, so a retried step finds the child it already
// started instead of starting another. Delegation deeper than maxDepth fails fatally.
// The child trigger names the calling job's activation (events.ExtParent), from
// whose job the router takes the child's depth: the depth is never the trigger's
// to say.
//
// The calling job holds its worker slot while it waits, so a fleet whose every slot
// waits on children that need slots stalls until the step times out: keep delegation
// shallow and concurrency above the depth of your delegation chains.
func SkillTool(b *bus.Bus, maxDepth int) tool.Tool {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	c := client.New(b)
	return tool.Func("skill", func(ctx context.Context, call tool.Call) (any, error) {
		args := tool.NewArgs("skill", call.Args)
		if err := args.Only("name", "inputs"); err != nil {
			return nil, err
		}
		name, err := args.String("name")
		if err != nil {
			return nil, err
		}
		inputs, err := args.OptMap("inputs")
		if err != nil {
			return nil, err
		}
		if inputs == nil {
			inputs = map[string]any{}
		}
		p := parentOf(ctx)
		depth := p.depth + 1
		if depth > maxDepth {
			return nil, failure.Fatalf("skill: invoking %s would delegate %d levels deep; the limit is %d", name, depth, maxDepth)
		}
		data, err := json.Marshal(inputs)
		if err != nil {
			return nil, failure.Repair("skill: inputs: %v", err)
		}
		t := client.Trigger{Skill: name, Source: "/skillbus/skill-tool", ID: call.IdempotencyKey, Data: data}
		if p.activation != "" {
			t.Extensions = map[string]string{events.ExtParent: p.activation}
		}
		act, err := c.Publish(ctx, t)
		if err != nil {
			return nil, failure.Wrap(failure.Retryable, err)
		}
		// A child parked on a repair is followed on until it ends (the client does
		// not stop at repairs unless made to): approved, it runs again and its
		// outputs are this call's; undecided within the step's timeout, the call
		// fails as retryable, and a retry finds the same child.
		res, err := c.Follow(ctx, act.ID, nil)
		if err != nil {
			return nil, failure.Wrap(failure.Retryable, err)
		}
		switch {
		case res.Unmatched != nil:
			return nil, failure.Fatalf("skill: %v", res.Err())
		case res.Failed != nil:
			return nil, failure.New(failure.Class(res.Failed.Class), "skill: %v", res.Err())
		case !res.Completed:
			// Never succeed without the child's result.
			return nil, failure.New(failure.Retryable, "skill: %s: %v", name, res.Err())
		}
		return res.Outputs, nil
	})
}
