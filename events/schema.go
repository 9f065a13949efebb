package events

import (
	"embed"
	"sort"
)

// Catalog maps every event type to a zero value of its data type.
var Catalog = map[string]any{
	TypeRouteDecided:          RouteDecided{},
	TypeRouteUnmatched:        RouteUnmatched{},
	TypeJob:                   Job{},
	TypeExecutionStarted:      ExecutionStarted{},
	TypeStepStarted:           StepStarted{},
	TypeStepCompleted:         StepCompleted{},
	TypeStepSkipped:           StepSkipped{},
	TypeStepFailed:            StepFailed{},
	TypeExecutionRetrying:     ExecutionRetrying{},
	TypeExecutionFallback:     ExecutionFallback{},
	TypeExecutionCompleted:    ExecutionCompleted{},
	TypeExecutionFailed:       ExecutionFailed{},
	TypeExecutionCancelled:    ExecutionCancelled{},
	TypeExecutionDeadlettered: ExecutionDeadlettered{},
	TypeAutohealTriggered:     AutohealTriggered{},
	TypeConfirmationRequested: ConfirmationRequested{},
	TypeConfirmationRecorded:  ConfirmationRecorded{},
	TypeWaitEnded:             WaitEnded{},
	TypeThrottleDue:           ThrottleDue{},
	TypeExecutionWaiting:      ExecutionWaiting{},
	TypeDLQReplayed:           DLQReplayed{},
	TypeRepairRequested:       RepairRequested{},
	TypeRepairAttempted:       RepairProgress{},
	TypeRepairProposed:        RepairProposed{},
	TypeRepairDecided:         RepairDecided{},
	TypeRepairSucceeded:       RepairProgress{},
	TypeRepairFailed:          RepairProgress{},
	TypeRepairNoImprovement:   RepairProgress{},
	TypeRepairSkipped:         RepairProgress{},
}

// Types lists every event type, sorted.
func Types() []string {
	ts := make([]string, 0, len(Catalog))
	for t := range Catalog {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}

//go:embed schema/*.json
var schemas embed.FS

// Schema returns the JSON Schema (draft 2020-12) of the data of an event type, or nil
// for a type not in the catalog. The schemas are generated from the Go types
// (go test ./events -update) and a test keeps them in step.
func Schema(typ string) []byte {
	b, err := schemas.ReadFile("schema/" + typ + ".json")
	if err != nil {
		return nil
	}
	return b
}
