package instruct

import (
	"fmt"
	"time"

	"github.com/skillbus/skillbus/pkg/tool/llm"
)

// Observer is told about each model turn and tool call as it happens, so the
// worker can publish them as step events. Calls come from the goroutine that
// runs Execute, in order.
type Observer interface {
	// TurnStarted and TurnCompleted bracket one chat request. reply is the
	// model's message (text and tool calls); err is set when the request failed.
	TurnStarted(turn int)
	TurnCompleted(turn int, reply llm.Message, usage llm.Usage, err error, d time.Duration)
	// ToolStarted and ToolCompleted bracket one tool call; err is set when the
	// tool failed, whether or not that ended the run.
	ToolStarted(call ToolCall)
	ToolCompleted(call ToolCall, result any, err error, d time.Duration)
}

// ToolCall is one call of a tool by the model.
type ToolCall struct {
	// Turn (from 1) and Index (from 0, within the turn) place the call.
	Turn, Index int
	// ID is the model's id of the call.
	ID string
	// Tool is the skillbus tool called (read_reference for the skill's files),
	// or the unknown name the model used.
	Tool string
	// Args are the arguments; nil when the model's were not a JSON object.
	Args map[string]any
}

// Step is the call's step id, "turn-<turn>.call-<index>", stable across
// redeliveries as long as the model calls the same tools; the tool gets it as
// Call.Step and "<executionid>/<step>" as the idempotency key.
func (c ToolCall) Step() string { return fmt.Sprintf("%s.call-%d", TurnStep(c.Turn), c.Index) }

// TurnStep is the step id of a model turn: "turn-<turn>".
func TurnStep(turn int) string { return fmt.Sprintf("turn-%d", turn) }

// NopObserver ignores everything.
type NopObserver struct{}

func (NopObserver) TurnStarted(int)                                                 {}
func (NopObserver) TurnCompleted(int, llm.Message, llm.Usage, error, time.Duration) {}
func (NopObserver) ToolStarted(ToolCall)                                            {}
func (NopObserver) ToolCompleted(ToolCall, any, error, time.Duration)               {}
